//! Shared Live Rooms as values: identifiers and opaque references, the wire requests and
//! receipts (named, versioned, with the four false answer-authority flags), the chat
//! snapshot limits, and the one recursive redaction every room projection passes through.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

mod ids;
mod redact;
mod requests;
mod views;

pub use ids::*;
pub use redact::*;
pub use requests::*;
pub use views::*;

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
/// The observer lane's body limit, sized from the decoded bounds: every character of a
/// snapshot may arrive as the longest JSON escape (`\uD83D\uDE00`, 12 bytes for one code
/// point), every chat id character as `\u0041` (6), and the envelope (names, roles,
/// punctuation, whitespace) fits in 16 KiB. The decoded content is then checked against
/// the decoded bounds by `ObserverRequest::validate`.
pub const OBSERVER_BODY_MAX_BYTES: usize = SNAPSHOT_MAX_TOTAL_CHARS * 12 + CHAT_ID_MAX_CHARS * 6 + 16 * 1024;

/// What replaces redacted material.
pub const REDACTED: &str = crate::domain::credential::REDACTED;

/// The four answer-authority flags every room and binding receipt carries, always false:
/// a room receipt is an observation or control receipt, never an answer.
pub type FalseFlags = crate::domain::wire::NotAnAnswer;

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use crate::domain::wire::constant;

constant!(RoomSchemaName = ROOM_SCHEMA);
constant!(RoomListSchemaName = ROOM_LIST_SCHEMA);
constant!(RunBindingSchemaName = RUN_BINDING_SCHEMA);
constant!(ChatBindingSchemaName = CHAT_BINDING_SCHEMA);
constant!(RevocationSchemaName = REVOCATION_SCHEMA);

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
            "nested": [{ "x": jwt, jwt: 1, "note": format!("use Bearer abcdefgh1 and {jwt} now") }],
            "room_id": room.as_str(),
            "sk-live-abcdef": "v",
        }));
        let text = v.to_string();
        assert!(!text.contains("eyJ"), "{text}");
        assert!(!text.contains("abcdefgh1"), "the word after Bearer is redacted: {text}");
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
