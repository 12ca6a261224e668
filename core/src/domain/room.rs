//! Shared Live Rooms as values: identifiers and opaque references, the wire requests and
//! receipts (named, versioned, with the four false answer-authority flags), the chat
//! snapshot limits, and the one recursive redaction every room projection passes through.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{hash_parts, random_hex};

pub const ROOM_SCHEMA: &str = "helix.room.v1";
pub const ROOM_LIST_SCHEMA: &str = "helix.room_list.v1";
pub const RUN_BINDING_SCHEMA: &str = "helix.room_run_binding.v1";
pub const CHAT_BINDING_SCHEMA: &str = "helix.room_chat_binding.v1";
pub const REVOCATION_SCHEMA: &str = "helix.room_binding_revocation.v1";
pub const OBSERVER_CREATED_SCHEMA: &str = "helix.agent_run_observer_binding_created.v1";
pub const OBSERVER_SCHEMA: &str = "helix.agent_run_observer_binding.v1";
pub const OBSERVER_EVENTS_SCHEMA: &str = "helix.agent_run_observer_event_page.v1";
pub const OBSERVER_DISCONNECT_SCHEMA: &str = "helix.agent_run_observer_disconnect.v1";

/// The chat snapshot a browser may send: at most this many messages ...
pub const SNAPSHOT_MAX_MESSAGES: usize = 12;
/// ... each at most this many characters ...
pub const SNAPSHOT_MAX_MESSAGE_CHARS: usize = 2_000;
/// ... and this many in all.
pub const SNAPSHOT_MAX_TOTAL_CHARS: usize = 12_000;
/// Room names: 1-120 characters after trimming.
pub const ROOM_NAME_MAX_CHARS: usize = 120;
/// Browser chat ids: 1-200 characters of `[A-Za-z0-9._:-]`.
pub const CHAT_ID_MAX_CHARS: usize = 200;

/// What replaces redacted material.
pub const REDACTED: &str = "[redacted]";

/// The four answer-authority flags every room and binding receipt carries, always false:
/// a room receipt is an observation or control receipt, never an answer.
pub type FalseFlags = super::wire::NotAnAnswer;

use super::wire::constant;
use schemars::{Schema, SchemaGenerator, json_schema};
use serde::Serializer;
use std::borrow::Cow;

constant!(RoomSchemaName = ROOM_SCHEMA);
constant!(RoomListSchemaName = ROOM_LIST_SCHEMA);
constant!(RunBindingSchemaName = RUN_BINDING_SCHEMA);
constant!(ChatBindingSchemaName = CHAT_BINDING_SCHEMA);
constant!(RevocationSchemaName = REVOCATION_SCHEMA);

// ---------- identifiers ----------

fn opaque(prefix: &str, hex_len: usize, raw: &str) -> bool {
    raw.strip_prefix(prefix)
        .is_some_and(|h| h.len() == hex_len && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

macro_rules! opaque_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $hex:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;
            /// Exactly the shape this service issues; anything else is not found.
            pub fn parse(raw: &str) -> Option<Self> {
                opaque($prefix, $hex, raw).then(|| Self(raw.to_owned()))
            }
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, random_hex($hex / 2)))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

opaque_id!(
    /// A room (`room_` + 20 hex).
    RoomId, "room_", 20
);
opaque_id!(
    /// An opaque run-room binding reference (`rrb_` + 24 hex).
    RunBindingRef, "rrb_", 24
);
opaque_id!(
    /// An opaque claimed run-chat binding reference (`rcb_` + 24 hex).
    ChatBindingRef, "rcb_", 24
);
opaque_id!(
    /// A browser's observer binding reference (`obs_` + 24 hex).
    ObserverRef, "obs_", 24
);

/// The browser-issued chat claim handle: show-once, short-lived, stored only as a hash.
/// Its `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct ClaimHandle(String);

impl ClaimHandle {
    pub const PREFIX: &'static str = "hcc_";

    pub fn generate() -> Self {
        Self(format!("{}{}", Self::PREFIX, random_hex(32)))
    }
    pub fn parse(raw: &str) -> Option<Self> {
        opaque(Self::PREFIX, 64, raw).then(|| Self(raw.to_owned()))
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// The stored form (the key of the claim item).
    pub fn hash(&self) -> String {
        hash_parts(&["room-chat-claim.v1", &self.0])
    }
}

impl std::fmt::Debug for ClaimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClaimHandle(<redacted>)")
    }
}

/// True for the shape of a claim handle (the preflight admits it only to its claim tool).
pub fn is_claim_handle(s: &str) -> bool {
    opaque(ClaimHandle::PREFIX, 64, s)
}

/// The server's own identifiers, which redaction leaves alone: they are opaque, minted
/// here, and grant nothing.
pub fn is_own_identifier(s: &str) -> bool {
    RoomId::parse(s).is_some()
        || RunBindingRef::parse(s).is_some()
        || ChatBindingRef::parse(s).is_some()
        || ObserverRef::parse(s).is_some()
        || opaque("run_", 32, s)
        || opaque("snap_", 24, s)
        || opaque("msg_", 24, s)
}

// ---------- credential shapes and redaction ----------

/// True when a value carries a credential (the shared rule the MCP preflight applies to
/// free text: credential-shaped words, `Bearer <value>`, `password=…`), or a claim handle
/// anywhere. Plain words such as "token" stay admissible in names and chat text.
pub fn credential_shaped(value: &str) -> bool {
    crate::domain::credential::text_carries_credential(value) || value.split_whitespace().any(is_claim_handle)
}

/// Redacts a free-text value word by word: credential-shaped words, and the word after
/// `Bearer`/`Basic`, become `[redacted]`.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut redact_next = false;
    let mut rest = text;
    while !rest.is_empty() {
        let ws = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..ws]);
        rest = &rest[ws..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..end];
        rest = &rest[end..];
        if word.is_empty() {
            continue;
        }
        let lower = word.to_ascii_lowercase();
        let scheme = lower == "bearer" || lower == "basic";
        if redact_next || (!scheme && credential_shaped(word) && !is_own_identifier(word)) {
            out.push_str(REDACTED);
        } else {
            out.push_str(word);
        }
        redact_next = scheme;
    }
    out
}

/// Redacts a projection recursively, object keys included: any string value or key
/// shaped like a credential is replaced; the server's own identifiers stay.
pub fn redact(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(redact_string(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(redact).collect()),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = if credential_shaped(&k) && !is_own_identifier(&k) { redacted_key(&out) } else { k };
                out.insert(key, redact(v));
            }
            Value::Object(out)
        }
        other => other,
    }
}

/// A view that serialises redacted: the one boundary every room output crosses, kept
/// in the type so a handler cannot send a projection unredacted.
#[derive(Debug, Clone, PartialEq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    pub fn new(view: T) -> Self {
        Self(view)
    }
    /// The view before redaction (for the service's own reads, never for output).
    pub fn get(&self) -> &T {
        &self.0
    }
}

impl<T: Serialize> Serialize for Redacted<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        redact(serde_json::to_value(&self.0).map_err(serde::ser::Error::custom)?).serialize(s)
    }
}

fn redact_string(s: String) -> String {
    if is_own_identifier(&s) {
        s
    } else if s.contains(char::is_whitespace) {
        redact_text(&s)
    } else if credential_shaped(&s) {
        REDACTED.to_owned()
    } else {
        s
    }
}

/// A unique key for a redacted object key (two redacted keys must not collide).
fn redacted_key(map: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut n = 0;
    loop {
        let k = if n == 0 { REDACTED.to_owned() } else { format!("{REDACTED}#{n}") };
        if !map.contains_key(&k) {
            return k;
        }
        n += 1;
    }
}

// ---------- requests ----------

/// Why a room request was refused; the message never echoes the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoomInvalid {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}: credential-shaped values are refused")]
    CredentialShaped(&'static str),
}

/// `POST /api/v1/rooms`. Owner, tenant and account come from the principal; any such
/// field in the body is an unknown field and refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRoomRequest {
    /// Display name, 1-120 characters.
    pub name: String,
    /// Optional description, at most 1,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl CreateRoomRequest {
    pub fn validate(&self) -> Result<(), RoomInvalid> {
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > ROOM_NAME_MAX_CHARS {
            return Err(RoomInvalid::Invalid(format!("name: must be 1-{ROOM_NAME_MAX_CHARS} characters")));
        }
        if name.chars().any(char::is_control) {
            return Err(RoomInvalid::Invalid("name: control characters are refused".into()));
        }
        if credential_shaped(name) {
            return Err(RoomInvalid::CredentialShaped("name"));
        }
        if let Some(d) = &self.description {
            if d.chars().count() > 1_000 {
                return Err(RoomInvalid::Invalid("description: at most 1000 characters".into()));
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
    pub room_id: String,
    /// The caller's own run (run_...).
    pub run_id: String,
}

/// `POST /api/v1/rooms/chat-bindings/claim`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatClaimRequest {
    /// The one-time claim handle the signed-in browser issued (hcc_...).
    pub claim_handle: String,
    /// The caller's own run (run_...) to bind the chat to.
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identifiers_parse_only_their_own_shape() {
        let r = RoomId::generate();
        assert!(RoomId::parse(r.as_str()).is_some());
        assert!(RunBindingRef::parse(r.as_str()).is_none());
        assert!(RoomId::parse("room_ABCDEF0123456789abcd").is_none(), "upper case");
        assert!(RoomId::parse("room_0123").is_none());
        let b = RunBindingRef::generate();
        assert!(RunBindingRef::parse(b.as_str()).is_some());
        assert!(ChatBindingRef::parse(b.as_str()).is_none());
        assert!(is_claim_handle(ClaimHandle::generate().expose()));
        assert!(!crate::domain::credential::looks_like_credential(r.as_str()), "room ids are not credential-shaped");
        assert!(!crate::domain::credential::looks_like_credential(b.as_str()));
    }

    #[test]
    fn claim_handles_are_hashed_and_redacted_in_debug() {
        let h = ClaimHandle::generate();
        assert!(!format!("{h:?}").contains(h.expose()));
        assert_ne!(h.hash(), h.expose());
        assert!(credential_shaped(h.expose()));
    }

    #[test]
    fn redaction_is_recursive_and_covers_keys() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlc2ln";
        let room = RoomId::generate();
        let v = redact(json!({
            "name": "fine",
            "nested": [{ "x": jwt, jwt: 1, "note": format!("use Bearer abc and {jwt} now") }],
            "room_id": room.as_str(),
            "sk-live-abcdef": "v",
        }));
        let text = v.to_string();
        assert!(!text.contains("eyJ"), "{text}");
        assert!(!text.contains("abc and"), "the word after Bearer is redacted: {text}");
        assert!(!text.contains("sk-live"), "{text}");
        assert_eq!(v["room_id"], room.as_str());
        assert_eq!(v["name"], "fine");
        assert_eq!(v["nested"][0]["x"], REDACTED);
        assert!(v["nested"][0]["note"].as_str().unwrap().ends_with("now"));
    }

    #[test]
    fn snapshot_limits_are_12_messages_2000_each_12000_in_all() {
        let msg = |n: usize| SnapshotMessage { role: SnapshotRole::User, content: "a".repeat(n) };
        let req = |snapshot: Vec<SnapshotMessage>| ObserverRequest { chat_id: "chat-1".into(), snapshot };
        assert!(req(vec![msg(2_000); 6]).validate().is_ok());
        assert!(req(vec![msg(1); 13]).validate().is_err());
        assert!(req(vec![msg(2_001)]).validate().is_err());
        assert!(req(vec![msg(1_100); 11]).validate().is_err(), "12,100 in all");
        assert!(req(vec![msg(1_000); 12]).validate().is_ok());
        assert!(ObserverRequest { chat_id: "a/b".into(), snapshot: vec![] }.validate().is_err());
        let out =
            req(vec![SnapshotMessage { role: SnapshotRole::Assistant, content: "key sk-live-0123456789 here".into() }])
                .validate()
                .unwrap();
        assert_eq!(out[0].content, format!("key {REDACTED} here"));
    }

    #[test]
    fn room_names_refuse_credentials_and_bounds() {
        let r = |n: &str| CreateRoomRequest { name: n.into(), description: None }.validate();
        assert!(r("Lab bench").is_ok());
        assert!(r("  ").is_err());
        assert!(r(&"n".repeat(121)).is_err());
        assert_eq!(r("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"), Err(RoomInvalid::CredentialShaped("name")));
        assert!(r("my ghp_abcdefghijkl0123 room").is_err());
        assert!(r("Token economics: password policy").is_ok(), "plain words are prose, not credentials");
        assert!(r("password=hunter2hunter2").is_err());
    }

    #[test]
    fn terminal_message_ids_are_stable() {
        let a = terminal_message_id("obs_1", "run_1", "h");
        assert_eq!(a, terminal_message_id("obs_1", "run_1", "h"));
        assert_ne!(a, terminal_message_id("obs_2", "run_1", "h"));
        assert!(is_own_identifier(&a));
    }
}
