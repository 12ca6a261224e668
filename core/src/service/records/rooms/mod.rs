//! The room items of the table: keys, one typed record per kind (`to_item`/`from_item`),
//! the stored statuses as serde enums, the conditions room writes are guarded by, and
//! the named reads of the room use cases. Stored shapes are a compatibility promise:
//! attribute names, key strings and body fields are exactly what the room service has
//! always written (`core/tests/fixtures/items/rooms/` holds captured items).
//! Knows the store and the domain values; must not depend on the use cases above it.

mod binding;
mod observer;
mod reads;
mod room;

pub use binding::{Binding, BindingKind, BindingState, BindingTarget, RunChatSlot, RunRoomSlot};
pub use observer::{Claim, ObserverRecord, ObserverState, Snapshot};
pub use reads::*;
pub use room::{AccountRoom, Consent, Invite, Membership, RoomRecord, RoomStatus};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::BODY;
use crate::domain::hash_parts;
use crate::error::ApiError;
use crate::store::{Cond, Item, Key};

// ---------- keys ----------

pub(super) const ROOM_PREFIX: &str = "ROOM#";
pub(super) const MEMBER_PREFIX: &str = "MEM#";

pub fn room_key(room_id: &str) -> Key {
    Key::new(format!("{ROOM_PREFIX}{room_id}"), "ROOM")
}
pub fn member_key(room_id: &str, account_id: &str) -> Key {
    Key::new(format!("{ROOM_PREFIX}{room_id}"), format!("{MEMBER_PREFIX}{account_id}"))
}
/// The durable consent receipt of one member for one consent version.
pub fn consent_key(room_id: &str, account_id: &str, version: u32) -> Key {
    Key::new(format!("{ROOM_PREFIX}{room_id}"), format!("CONSENT#{account_id}#{version:010}"))
}
/// The account's listing entry of a room it belongs to (written with the membership).
pub fn account_room_key(account_id: &str, room_id: &str) -> Key {
    Key::new(account_pk(account_id), format!("{ROOM_PREFIX}{room_id}"))
}
/// The one-active-run-room-binding slot of a run.
pub fn run_room_slot(run_id: &str) -> Key {
    Key::new(format!("RUNROOM#{run_id}"), "SLOT")
}
/// The one-active-run-chat-binding slot of a run.
pub fn run_chat_slot(run_id: &str) -> Key {
    Key::new(format!("RUNCHAT#{run_id}"), "SLOT")
}
/// A binding, by the hash of its opaque reference (the reference itself is never stored).
pub fn bind_key(binding_ref: &str) -> Key {
    Key::new(format!("BIND#{}", hash_parts(&["room-binding.v1", binding_ref])), "BIND")
}
/// A chat claim handle, by its hash (TTL; consumed by a conditional delete).
pub fn claim_key(handle_hash: &str) -> Key {
    Key::new(format!("CLAIM#{handle_hash}"), "CLAIM")
}
/// An invite, by the hash of its show-once code (TTL; consumed by a conditional delete).
pub fn invite_key(code_hash: &str) -> Key {
    Key::new(format!("INVITE#{code_hash}"), "INVITE")
}
/// The stored form of an invite code.
pub fn invite_code_hash(code: &str) -> String {
    hash_parts(&["room-invite.v1", code])
}
pub fn observer_key(observer_ref: &str) -> Key {
    Key::new(format!("OBS#{observer_ref}"), "OBS")
}
pub fn snapshot_key(observer_ref: &str) -> Key {
    Key::new(format!("OBS#{observer_ref}"), "SNAP")
}

pub(super) fn account_pk(account_id: &str) -> String {
    format!("ACCOUNT#{account_id}")
}

// ---------- attribute names (the only place they are spelled) ----------

pub(super) const OWNER_ACCOUNT: &str = "owner_account";
pub(super) const STATUS: &str = "status";
pub(super) const CONSENT_VERSION: &str = "consent_version";
pub(super) const CONSENT_RECEIPT: &str = "consent_receipt";
pub(super) const ACCEPTED_AT: &str = "accepted_at";
pub(super) const ROLE: &str = "role";
pub(super) const ROOM_ID: &str = "room_id";
pub(super) const RUN_ID: &str = "run_id";
pub(super) const OWNER_HASH: &str = "owner_hash";
pub(super) const BINDING_REF: &str = "binding_ref";
pub(super) const KIND: &str = "kind";
pub(super) const CREATED_AT: &str = "created_at";
pub(super) const REVOKED_AT: &str = "revoked_at";
pub(super) const OBSERVER_REF: &str = "observer_ref";
pub(super) const ACCOUNT_ID: &str = "account_id";
pub(super) const CREATED_BY: &str = "created_by";

pub(super) fn broken(what: &'static str) -> ApiError {
    ApiError::internal(std::io::Error::other(what))
}

/// The stored string of a serde enum value (`"active"`, `"run_room"`, ...).
pub(super) fn tag(v: &impl Serialize) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

pub(super) fn untag<T: DeserializeOwned>(s: Option<&str>, what: &'static str) -> Result<T, ApiError> {
    serde_json::from_value(serde_json::Value::String(s.ok_or_else(|| broken(what))?.to_owned()))
        .map_err(|_| broken(what))
}

pub(super) fn body<T: DeserializeOwned>(item: &Item, what: &'static str) -> Result<T, ApiError> {
    serde_json::from_str(item.s(BODY).ok_or_else(|| broken(what))?).map_err(ApiError::internal)
}

pub(super) fn text(v: &impl Serialize) -> Result<String, ApiError> {
    serde_json::to_string(v).map_err(ApiError::internal)
}

pub(super) fn s_or_empty(item: &Item, name: &str) -> String {
    item.s(name).unwrap_or_default().to_owned()
}

/// The version of a stored body. Version 1 is also the shape written before bodies
/// carried the field, hence the default.
pub const BODY_VERSION: u32 = 1;

pub(super) fn first_version() -> u32 {
    1
}

// ---------- conditions ----------

/// The room (or membership) still has this consent version.
pub fn consent_is(version: u32) -> Cond {
    Cond::eq_n(CONSENT_VERSION, version as i64)
}

/// The binding is still active.
pub fn binding_active() -> Cond {
    Cond::eq_s(STATUS, tag(&BindingState::Active))
}

/// A slot naming another binding is never freed; a missing slot does not block cleanup.
pub fn slot_free_or_held_by(binding_ref: &str) -> Cond {
    Cond::Or(vec![Cond::NotExists, Cond::eq_s(BINDING_REF, binding_ref)])
}

/// The claim still exists and was issued to this account.
pub fn claim_held_by(account_id: &str) -> Cond {
    Cond::And(vec![Cond::Exists, Cond::eq_s(ACCOUNT_ID, account_id)])
}

/// The observer is still in this state.
pub fn observer_in(state: ObserverState) -> Cond {
    Cond::eq_s(STATUS, tag(&state))
}

/// The run still belongs to this owner. A room write guards the run item with it, so a
/// condition on the run's attributes is spelled beside the run key, not in the use case.
pub fn run_owned_by(owner_hash: &str) -> Cond {
    Cond::eq_s(OWNER_HASH, owner_hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::room::RoomRole;

    #[test]
    fn stored_statuses_keep_the_strings_already_in_the_table() {
        let cases: [(String, &str); 11] = [
            (tag(&RoomStatus::Active), "active"),
            (tag(&RoomStatus::Closed), "closed"),
            (tag(&RoomRole::Owner), "owner"),
            (tag(&RoomRole::Member), "member"),
            (tag(&BindingKind::RunRoom), "run_room"),
            (tag(&BindingKind::RunChat), "run_chat"),
            (tag(&BindingState::Active), "active"),
            (tag(&BindingState::Revoked), "revoked"),
            (tag(&ObserverState::AwaitingClaim), "awaiting_claim"),
            (tag(&ObserverState::Bound), "bound"),
            (tag(&ObserverState::Disconnected), "disconnected"),
        ];
        for (stored, want) in cases {
            assert_eq!(stored, want);
        }
    }

    #[test]
    fn room_keys_have_the_documented_shapes() {
        assert_eq!(room_key("room_a"), Key::new("ROOM#room_a", "ROOM"));
        assert_eq!(member_key("room_a", "acct_b"), Key::new("ROOM#room_a", "MEM#acct_b"));
        assert_eq!(consent_key("room_a", "acct_b", 2), Key::new("ROOM#room_a", "CONSENT#acct_b#0000000002"));
        assert_eq!(account_room_key("acct_b", "room_a"), Key::new("ACCOUNT#acct_b", "ROOM#room_a"));
        assert_eq!(run_room_slot("run_c"), Key::new("RUNROOM#run_c", "SLOT"));
        assert_eq!(run_chat_slot("run_c"), Key::new("RUNCHAT#run_c", "SLOT"));
        assert_eq!(observer_key("obs_d"), Key::new("OBS#obs_d", "OBS"));
        assert_eq!(snapshot_key("obs_d"), Key::new("OBS#obs_d", "SNAP"));
        assert!(bind_key("rrb_e").pk.starts_with("BIND#") && !bind_key("rrb_e").pk.contains("rrb_e"));
        assert_eq!(invite_key(&invite_code_hash("hri_x")).pk, format!("INVITE#{}", invite_code_hash("hri_x")));
    }

    #[test]
    fn a_membership_and_a_consent_receipt_read_back_what_they_write() {
        let m = Membership {
            room_id: "room_a".into(),
            account_id: "acct_b".into(),
            role: RoomRole::Owner,
            consent_version: 3,
            consent_receipt: Consent::receipt_ref("room_a", "acct_b", 3),
            accepted_at: "2026-01-01T00:00:00.000Z".into(),
        };
        assert_eq!(Membership::from_item(&m.to_item()), m);
        let c = Consent {
            room_id: "room_a".into(),
            account_id: "acct_b".into(),
            version: 3,
            consent_receipt: m.consent_receipt.clone(),
            accepted_at: m.accepted_at.clone(),
        };
        assert_eq!(Consent::from_item(&c.to_item()).unwrap(), c);
    }

    #[test]
    fn a_membership_without_a_consent_version_is_never_current() {
        let bare = Item::new("ROOM#room_a", "MEM#acct_b").with_s("role", "admin");
        let m = Membership::from_item(&bare);
        assert_eq!(m.consent_version, 0);
        assert_eq!(m.role, RoomRole::Member, "only \"owner\" grants the owner's role");
    }

    #[test]
    fn bindings_of_both_kinds_read_back_what_they_write_and_an_unknown_kind_is_refused() {
        let room = Binding {
            owner_hash: "o".into(),
            state: BindingState::Revoked,
            run_id: "run_c".into(),
            created_at: "t0".into(),
            revoked_at: Some("t1".into()),
            target: BindingTarget::Room {
                room_id: "room_a".into(),
                role: RoomRole::Member,
                consent_version: 2,
                consent_receipt: "consent_x".into(),
            },
        };
        let chat = Binding {
            state: BindingState::Active,
            revoked_at: None,
            target: BindingTarget::Chat { observer_ref: "obs_d".into() },
            ..room.clone()
        };
        for b in [room, chat] {
            assert_eq!(Binding::from_item(&b.to_item("rrb_e")).unwrap(), b);
        }
        let odd = Item::new("BIND#x", "BIND").with_s("kind", "run_world").with_s("status", "active");
        assert!(Binding::from_item(&odd).is_err());
    }

    #[test]
    fn a_body_without_a_schema_version_reads_as_version_one() {
        let body = r#"{"room_id":"room_a","name":"Lab","description":null,"owner_account":"acct_b","status":"active","consent_version":1,"created_at":"2026-01-01T00:00:00Z"}"#;
        let room = RoomRecord::from_item(&Item::new("ROOM#room_a", "ROOM").with_s(BODY, body)).unwrap();
        assert_eq!(room.schema_version, 1);
        assert!(room.is_active());
        let written: serde_json::Value = serde_json::from_str(room.to_item().unwrap().s(BODY).unwrap()).unwrap();
        assert_eq!(written["schema_version"], BODY_VERSION);
    }
}
