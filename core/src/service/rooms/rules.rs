//! The room rules as functions of stored records: who may see, manage, invite, remove,
//! raise consent, bind, claim and withdraw, and which consent version an acceptance
//! must name. No I/O: the use cases read, ask these, then write. A refusal that must
//! not reveal whether something exists is `not_found`.

use crate::domain::account::account_ref;
use crate::domain::room::ObserverStatus;
use crate::error::ApiError;
use crate::service::records::rooms::{
    Binding, BindingKind, Membership, ObserverRecord, ObserverState, RoomRecord, RoomTenant, RunRoomSlot,
};

/// The room as a bearer caller's tenant sees it: another tenant's room is absent, so every
/// rule after this one answers for it exactly as for a room that does not exist.
pub fn of_tenant(tenant: &RoomTenant, room: Option<RoomRecord>) -> Option<RoomRecord> {
    room.filter(|r| tenant.admits(r))
}

/// A room the account can see: it exists, is active, and the account is a member.
/// Anything else is not found, so a non-member learns nothing about the room.
pub fn visible(room: Option<RoomRecord>, member: Option<Membership>) -> Result<(RoomRecord, Membership), ApiError> {
    match (room, member) {
        (Some(room), Some(member)) if room.is_active() => Ok((room, member)),
        _ => Err(ApiError::NotFound),
    }
}

/// Only the owner manages a room (invites, members, consent versions); to anyone else
/// the room's management is not found.
pub fn may_manage(room: &RoomRecord, account_id: &str) -> Result<(), ApiError> {
    if room.owner_account == account_id { Ok(()) } else { Err(ApiError::NotFound) }
}

/// A member binds only under the room's current consent version.
pub fn may_bind(room: &RoomRecord, member: &Membership) -> Result<(), ApiError> {
    if consent_current(room, member) { Ok(()) } else { Err(ApiError::ConsentRequired) }
}

/// True when the member accepted the room's current consent version.
pub fn consent_current(room: &RoomRecord, member: &Membership) -> bool {
    member.consent_version == room.consent_version
}

/// An acceptance (of an invite or of a raised version) names exactly the room's current
/// version: accepting an older text is no consent to the current one.
pub fn accepts_current(room: &RoomRecord, consent_version: u32) -> Result<(), ApiError> {
    if consent_version == room.consent_version { Ok(()) } else { Err(ApiError::ConsentRequired) }
}

/// The version a raise moves the room to.
pub fn raised(room: &RoomRecord) -> u32 {
    room.consent_version + 1
}

/// The account behind an opaque member reference the owner may remove: any member but
/// the owner. An unknown reference and the owner's own are both not found.
pub fn removable<'a>(room: &RoomRecord, members: &'a [Membership], member_ref: &str) -> Result<&'a str, ApiError> {
    members
        .iter()
        .map(|m| m.account_id.as_str())
        .find(|a| account_ref(a) == member_ref && *a != room.owner_account)
        .ok_or(ApiError::NotFound)
}

/// An invite code has the shape this service issues (`hri_` + 64 hex), checked before
/// any read.
pub fn invite_code_shaped(code: &str) -> bool {
    code.strip_prefix("hri_").is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A bind whose run already holds a slot: the same owner's binding to the same room is
/// an exact retry (answered from it); anything else is `run_already_bound`.
pub fn retry_of(slot: &RunRoomSlot, owner_hash: &str, room_id: &str) -> Result<(), ApiError> {
    if slot.owner_hash == owner_hash && slot.room_id == room_id { Ok(()) } else { Err(ApiError::RunAlreadyBound) }
}

/// Only the binding's owner withdraws it, through the route of its kind; another
/// owner's binding is indistinguishable from a missing one.
pub fn may_withdraw(binding: &Binding, owner_hash: &str, kind: BindingKind) -> Result<(), ApiError> {
    if binding.owner_hash == owner_hash && binding.kind() == kind { Ok(()) } else { Err(ApiError::NotFound) }
}

/// A claim handle is consumed once, only while its observer still awaits a claim.
pub fn claimable(observer: &ObserverRecord) -> Result<(), ApiError> {
    if observer.status == ObserverState::AwaitingClaim { Ok(()) } else { Err(ApiError::ClaimHandleInvalid) }
}

/// What the browser is told about its observer at `now`.
pub fn observer_status(observer: &ObserverRecord, binding: Option<&Binding>, now: i64) -> ObserverStatus {
    match observer.status {
        ObserverState::Disconnected => ObserverStatus::Disconnected,
        ObserverState::Bound if binding.is_some_and(Binding::is_active) => ObserverStatus::Bound,
        ObserverState::Bound => ObserverStatus::Revoked,
        ObserverState::AwaitingClaim if observer.claim_expires_at <= now => ObserverStatus::Expired,
        ObserverState::AwaitingClaim => ObserverStatus::AwaitingClaim,
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::domain::room::RoomRole;
    use crate::service::records::rooms::{BindingState, BindingTarget, RoomStatus};

    const OWNER: &str = "acct_owner";
    const OTHER: &str = "acct_other";

    fn room(status: RoomStatus, consent_version: u32) -> RoomRecord {
        RoomRecord {
            room_id: "room_0123456789abcdef0123".into(),
            name: "Lab".into(),
            description: None,
            owner_account: OWNER.into(),
            status,
            consent_version,
            created_at: Utc::now(),
            schema_version: 1,
            tenant_ref: None,
        }
    }

    fn member(account_id: &str, role: RoomRole, consent_version: u32) -> Membership {
        Membership {
            room_id: "room_0123456789abcdef0123".into(),
            account_id: account_id.into(),
            role,
            consent_version,
            consent_receipt: "consent_x".into(),
            accepted_at: "2026-01-01T00:00:00.000Z".into(),
            action_authority: false,
        }
    }

    fn binding(kind: BindingKind, owner_hash: &str, state: BindingState) -> Binding {
        let target = match kind {
            BindingKind::RunRoom => BindingTarget::Room {
                room_id: "room_0123456789abcdef0123".into(),
                role: RoomRole::Owner,
                consent_version: 1,
                consent_receipt: "consent_x".into(),
            },
            BindingKind::RunChat => BindingTarget::Chat { observer_ref: "obs_x".into() },
        };
        Binding {
            owner_hash: owner_hash.into(),
            state,
            run_id: "run_x".into(),
            created_at: "t".into(),
            revoked_at: None,
            target,
        }
    }

    fn observer(status: ObserverState, claim_expires_at: i64) -> ObserverRecord {
        ObserverRecord {
            observer_ref: "obs_x".into(),
            account_id: OWNER.into(),
            chat_hash: "c".into(),
            claim_hash: "h".into(),
            status,
            binding_ref: None,
            run_id: None,
            snapshot_ref: None,
            snapshot_message_count: 0,
            snapshot_char_count: 0,
            created_at: Utc::now(),
            claim_expires_at,
            schema_version: 1,
            tenant_ref: None,
        }
    }

    #[test]
    fn only_an_active_room_with_a_membership_is_visible() {
        let m = || Some(member(OTHER, RoomRole::Member, 1));
        let cases = [
            (Some(room(RoomStatus::Active, 1)), m(), true),
            (Some(room(RoomStatus::Closed, 1)), m(), false),
            (Some(room(RoomStatus::Active, 1)), None, false),
            (None, m(), false),
        ];
        for (r, mem, seen) in cases {
            let got = visible(r, mem);
            assert_eq!(got.is_ok(), seen);
            if !seen {
                assert!(matches!(got, Err(ApiError::NotFound)));
            }
        }
    }

    #[test]
    fn only_the_owner_manages_invites_members_and_consent() {
        let r = room(RoomStatus::Active, 1);
        assert!(may_manage(&r, OWNER).is_ok());
        assert!(matches!(may_manage(&r, OTHER), Err(ApiError::NotFound)));
    }

    #[test]
    fn a_member_binds_only_under_the_current_consent_version() {
        let cases = [(1, 1, true), (2, 1, false), (2, 2, true), (1, 0, false), (3, 4, false)];
        for (room_version, accepted, ok) in cases {
            let r = room(RoomStatus::Active, room_version);
            let got = may_bind(&r, &member(OTHER, RoomRole::Member, accepted));
            assert_eq!(got.is_ok(), ok, "room v{room_version}, accepted v{accepted}");
            if !ok {
                assert!(matches!(got, Err(ApiError::ConsentRequired)));
            }
        }
    }

    #[test]
    fn an_acceptance_must_name_the_current_version_and_a_raise_moves_it_by_one() {
        let r = room(RoomStatus::Active, 2);
        assert!(accepts_current(&r, 2).is_ok());
        for stale in [0, 1, 3] {
            assert!(matches!(accepts_current(&r, stale), Err(ApiError::ConsentRequired)));
        }
        assert_eq!(raised(&r), 3);
    }

    #[test]
    fn the_owner_removes_any_member_but_never_themself() {
        let r = room(RoomStatus::Active, 1);
        let members = [member(OWNER, RoomRole::Owner, 1), member(OTHER, RoomRole::Member, 1)];
        assert_eq!(removable(&r, &members, &account_ref(OTHER)).unwrap(), OTHER);
        assert!(matches!(removable(&r, &members, &account_ref(OWNER)), Err(ApiError::NotFound)));
        assert!(matches!(removable(&r, &members, "account:sha256:unknown"), Err(ApiError::NotFound)));
        assert!(matches!(removable(&r, &members, OTHER), Err(ApiError::NotFound)), "raw ids are not references");
    }

    #[test]
    fn invite_codes_have_exactly_the_issued_shape() {
        let code = format!("hri_{}", "a".repeat(64));
        assert!(invite_code_shaped(&code));
        assert!(!invite_code_shaped(&format!("hri_{}", "a".repeat(63))));
        assert!(!invite_code_shaped(&format!("hrx_{}", "a".repeat(64))));
        assert!(!invite_code_shaped(&format!("hri_{}", "g".repeat(64))));
    }

    #[test]
    fn a_bound_run_is_a_retry_only_for_the_same_owner_and_room() {
        let slot = RunRoomSlot {
            run_id: "run_x".into(),
            binding_ref: "rrb_x".into(),
            room_id: "room_a".into(),
            owner_hash: "me".into(),
        };
        let cases = [("me", "room_a", true), ("me", "room_b", false), ("you", "room_a", false)];
        for (owner, room_id, retry) in cases {
            let got = retry_of(&slot, owner, room_id);
            assert_eq!(got.is_ok(), retry, "{owner} {room_id}");
            if !retry {
                assert!(matches!(got, Err(ApiError::RunAlreadyBound)));
            }
        }
    }

    #[test]
    fn only_the_owner_withdraws_a_binding_and_only_through_its_kind() {
        use BindingKind::{RunChat, RunRoom};
        let cases = [
            (RunRoom, "me", RunRoom, true),
            (RunChat, "me", RunChat, true),
            (RunRoom, "me", RunChat, false),
            (RunChat, "you", RunChat, false),
        ];
        for (kind, owner, route, ok) in cases {
            let b = binding(kind, "me", BindingState::Active);
            assert_eq!(may_withdraw(&b, owner, route).is_ok(), ok, "{kind:?} by {owner} via {route:?}");
        }
    }

    #[test]
    fn a_claim_handle_is_consumed_only_while_its_observer_awaits_a_claim() {
        assert!(claimable(&observer(ObserverState::AwaitingClaim, 10)).is_ok());
        for state in [ObserverState::Bound, ObserverState::Disconnected] {
            assert!(matches!(claimable(&observer(state, 10)), Err(ApiError::ClaimHandleInvalid)));
        }
    }

    #[test]
    fn the_observer_status_reads_expiry_and_revocation_from_the_stored_state() {
        let active = binding(BindingKind::RunChat, "me", BindingState::Active);
        let revoked = binding(BindingKind::RunChat, "me", BindingState::Revoked);
        let cases = [
            (ObserverState::AwaitingClaim, 100, None, 99, ObserverStatus::AwaitingClaim),
            (ObserverState::AwaitingClaim, 100, None, 100, ObserverStatus::Expired),
            (ObserverState::Bound, 100, Some(&active), 500, ObserverStatus::Bound),
            (ObserverState::Bound, 100, Some(&revoked), 5, ObserverStatus::Revoked),
            (ObserverState::Bound, 100, None, 5, ObserverStatus::Revoked),
            (ObserverState::Disconnected, 100, Some(&active), 5, ObserverStatus::Disconnected),
        ];
        for (state, expires, b, now, want) in cases {
            assert_eq!(observer_status(&observer(state, expires), b, now), want, "{state:?} at {now}");
        }
    }
}
