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
mod tenant;

pub use binding::{Binding, BindingKind, BindingState, BindingTarget, RunChatSlot, RunRoomSlot};
pub use observer::{Claim, ObserverRecord, ObserverState, Snapshot};
pub use reads::*;
pub use room::{AccountRoom, Consent, Invite, Membership, RoomRecord, RoomStatus};
pub use tenant::{LEGACY_TENANT, RoomTenant};

pub(super) use super::attrs::{
    ACCEPTED_AT, ACCOUNT_ID, ACTION_AUTHORITY, BINDING_REF, CONSENT_RECEIPT, CONSENT_VERSION, CREATED_AT, CREATED_BY,
    KIND, OBSERVER_REF, OWNER_ACCOUNT, OWNER_HASH, REVOKED_AT, ROLE, ROOM_ID, RUN_ID, STATUS, TENANT_REF,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::BODY;
use super::accounts::account_key;
use crate::domain::hash_parts;
use crate::domain::room::RoomRole;
use crate::error::ApiError;
use crate::store::{Cond, Item, Key};

// ---------- keys ----------

pub(super) const ROOM_PREFIX: &str = "ROOM#";
pub(super) const MEMBER_PREFIX: &str = "MEM#";
pub(super) const CONSENT_PREFIX: &str = "CONSENT#";
pub(super) const RUN_ROOM_PREFIX: &str = "RUNROOM#";
pub(super) const RUN_CHAT_PREFIX: &str = "RUNCHAT#";
pub(super) const INVITE_PREFIX: &str = "INVITE#";
pub(super) const OBSERVER_PREFIX: &str = "OBS#";

/// The partition of a room: the room, its memberships, consent receipts and sources.
pub fn room_pk(room_id: &str) -> String {
    format!("{ROOM_PREFIX}{room_id}")
}
pub fn room_key(room_id: &str) -> Key {
    Key::new(room_pk(room_id), "ROOM")
}
pub fn member_key(room_id: &str, account_id: &str) -> Key {
    Key::new(room_pk(room_id), format!("{MEMBER_PREFIX}{account_id}"))
}
/// The durable consent receipt of one member for one consent version.
pub fn consent_key(room_id: &str, account_id: &str, version: u32) -> Key {
    Key::new(room_pk(room_id), format!("{CONSENT_PREFIX}{account_id}#{version:010}"))
}
/// The account's listing entry of a room it belongs to (written with the membership).
pub fn account_room_key(account_id: &str, room_id: &str) -> Key {
    Key::new(account_key(account_id).pk, format!("{ROOM_PREFIX}{room_id}"))
}
/// The one-active-run-room-binding slot of a run.
pub fn run_room_slot(run_id: &str) -> Key {
    Key::new(format!("{RUN_ROOM_PREFIX}{run_id}"), "SLOT")
}
/// The one-active-run-chat-binding slot of a run.
pub fn run_chat_slot(run_id: &str) -> Key {
    Key::new(format!("{RUN_CHAT_PREFIX}{run_id}"), "SLOT")
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
    Key::new(format!("{INVITE_PREFIX}{code_hash}"), "INVITE")
}
/// The stored form of an invite code.
pub fn invite_code_hash(code: &str) -> String {
    hash_parts(&["room-invite.v1", code])
}
pub fn observer_key(observer_ref: &str) -> Key {
    Key::new(format!("{OBSERVER_PREFIX}{observer_ref}"), "OBS")
}
pub fn snapshot_key(observer_ref: &str) -> Key {
    Key::new(format!("{OBSERVER_PREFIX}{observer_ref}"), "SNAP")
}

pub(super) fn broken(what: &'static str) -> ApiError {
    ApiError::internal(std::io::Error::other(what))
}

pub(super) use super::enum_text as tag;
pub(super) use super::version;

/// The stored enum an attribute names; a missing or unknown one is a broken item.
pub(super) fn untag<T: DeserializeOwned>(s: Option<&str>, what: &'static str) -> Result<T, ApiError> {
    s.and_then(super::enum_parse).ok_or_else(|| broken(what))
}

/// A room body of any kind; every room kind is at [`BODY_VERSION`].
pub(super) fn body<T: DeserializeOwned>(item: &Item, what: &'static str) -> Result<T, ApiError> {
    version::read(item.s(BODY).ok_or_else(|| broken(what))?)
}

pub(super) fn text(v: &impl Serialize) -> Result<String, ApiError> {
    serde_json::to_string(v).map_err(ApiError::internal)
}

pub(super) use super::attrs::text as s_or_empty;

/// A stored role: only the owner's grants the owner's role; anything else is a member.
pub(super) fn role_of(item: &Item) -> RoomRole {
    if item.s(ROLE) == Some(tag(&RoomRole::Owner).as_str()) { RoomRole::Owner } else { RoomRole::Member }
}

/// The version of the room, observer and claim bodies this code writes (the rule is
/// [`version`]'s: version 1 is written without the field).
pub const BODY_VERSION: u32 = version::FIRST;

// ---------- conditions ----------

/// The room (or membership) still has this consent version.
pub fn consent_is(version: u32) -> Cond {
    Cond::eq_n(CONSENT_VERSION, version as i64)
}

/// The membership may still act: the owner's, or one with action authority granted
/// (checked in the same transaction as a dispatch or an acknowledgement).
pub fn member_may_act() -> Cond {
    Cond::Or(vec![Cond::eq_s(ROLE, tag(&RoomRole::Owner)), Cond::eq_s(ACTION_AUTHORITY, "1")])
}

/// The room is still active.
pub fn room_active() -> Cond {
    Cond::eq_s(STATUS, tag(&RoomStatus::Active))
}

/// The room is still active and owned by `account`.
pub fn room_active_and_owned_by(account: &str) -> Cond {
    Cond::And(vec![room_active(), Cond::eq_s(OWNER_ACCOUNT, account)])
}

/// The membership is still the owner's.
pub fn member_is_owner() -> Cond {
    Cond::eq_s(ROLE, tag(&RoomRole::Owner))
}

/// The binding is still active.
pub fn binding_active() -> Cond {
    Cond::eq_s(STATUS, tag(&BindingState::Active))
}

/// A slot naming another binding is never freed; a missing slot does not block cleanup.
pub fn slot_free_or_held_by(binding_ref: &str) -> Cond {
    Cond::Or(vec![Cond::NotExists, Cond::eq_s(BINDING_REF, binding_ref)])
}

/// The claim still exists and was issued to this account under this tenant.
pub fn claim_held_by(account_id: &str, tenant: &RoomTenant) -> Cond {
    Cond::And(vec![Cond::Exists, Cond::eq_s(ACCOUNT_ID, account_id), tenant.cond()])
}

/// The observer is still in this state.
pub fn observer_in(state: ObserverState) -> Cond {
    Cond::eq_s(STATUS, tag(&state))
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
            action_authority: false,
        };
        assert_eq!(Membership::from_item(&m.to_item()), m);
        let granted = Membership { role: RoomRole::Member, action_authority: true, ..m.clone() };
        assert_eq!(Membership::from_item(&granted.to_item()), granted);
        assert!(granted.to_item().s("action_authority") == Some("1") && m.to_item().s("action_authority").is_none());
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
        assert_eq!(room.to_item().unwrap().s(BODY), Some(body), "version 1 is written as it was stored");
    }
}
