//! One-time confirmations after a form's post/redirect/get ("Action authority granted…"):
//! the form's answer is a `303` that also sets a short-lived cookie naming what was done (a
//! code of [`Done`], never caller text), and the page it leads to shows that sentence once
//! and clears the cookie. Nothing is stored and nothing the caller sent is reflected: an
//! unknown code is ignored.

use axum::http::HeaderMap;
use axum::http::header::SET_COOKIE;
use axum::response::Response;

use super::AppState;
use super::pages::{cookie, see_other, set_cookie};

const COOKIE: &str = "helix_done";
/// Long enough for the redirect, short enough that a later visit does not see it.
const MAX_AGE_SECS: i64 = 60;

/// What a page's form did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    Joined,
    ConsentAccepted,
    ConsentRaised,
    MemberRemoved,
    AuthorityGranted,
    AuthorityRevoked,
    RoomStopped,
    RoomStopCleared,
    SubjectSelected,
    SubjectStopped,
    SubjectStopCleared,
    PairingRevoked,
    RegionSet,
    RegionCleared,
}

impl Done {
    const ALL: [Done; 14] = [
        Done::Joined,
        Done::ConsentAccepted,
        Done::ConsentRaised,
        Done::MemberRemoved,
        Done::AuthorityGranted,
        Done::AuthorityRevoked,
        Done::RoomStopped,
        Done::RoomStopCleared,
        Done::SubjectSelected,
        Done::SubjectStopped,
        Done::SubjectStopCleared,
        Done::PairingRevoked,
        Done::RegionSet,
        Done::RegionCleared,
    ];

    fn code(self) -> &'static str {
        match self {
            Done::Joined => "joined",
            Done::ConsentAccepted => "consent_accepted",
            Done::ConsentRaised => "consent_raised",
            Done::MemberRemoved => "member_removed",
            Done::AuthorityGranted => "authority_granted",
            Done::AuthorityRevoked => "authority_revoked",
            Done::RoomStopped => "room_stopped",
            Done::RoomStopCleared => "room_stop_cleared",
            Done::SubjectSelected => "subject_selected",
            Done::SubjectStopped => "subject_stopped",
            Done::SubjectStopCleared => "subject_stop_cleared",
            Done::PairingRevoked => "pairing_revoked",
            Done::RegionSet => "region_set",
            Done::RegionCleared => "region_cleared",
        }
    }

    /// The sentence the page shows.
    pub fn sentence(self) -> &'static str {
        match self {
            Done::Joined => "You joined the room.",
            Done::ConsentAccepted => "Consent accepted: you can bind your runs to the room again.",
            Done::ConsentRaised => "Consent version raised: every member accepts it again before their next bind.",
            Done::MemberRemoved => "The member was removed from the room.",
            Done::AuthorityGranted => "Action authority granted: the member's agent may drive the player they select.",
            Done::AuthorityRevoked => "Action authority revoked: the member's agent can no longer act.",
            Done::RoomStopped => {
                "Emergency Stop: every player of this room is stopped; new actions are refused until you clear it."
            }
            Done::RoomStopCleared => "The room's Emergency Stop is cleared: new actions are allowed again.",
            Done::SubjectSelected => "Player selected: your agent acts through this player only.",
            Done::SubjectStopped => {
                "Emergency Stop: your player is stopped; new actions on it are refused until you clear it."
            }
            Done::SubjectStopCleared => "Your player's Emergency Stop is cleared.",
            Done::PairingRevoked => "The pairing is revoked: its connector is refused from now on.",
            Done::RegionSet => "Region set: an action outside it is refused.",
            Done::RegionCleared => "Region cleared.",
        }
    }

    fn of(code: &str) -> Option<Done> {
        Done::ALL.into_iter().find(|d| d.code() == code)
    }
}

/// `303 See Other` to the page at `to` (a path of this origin), which then says `done` once.
pub fn see_other_done(state: &AppState, to: &str, done: Done) -> Response {
    let mut res = see_other(to);
    res.headers_mut().append(SET_COOKIE, set_cookie(state, COOKIE, done.code(), to, MAX_AGE_SECS));
    res
}

/// What the request's confirmation cookie says was done (None: none, or a code this
/// service never sets), and whether the page must clear the cookie.
pub fn take(headers: &HeaderMap) -> (Option<Done>, bool) {
    match cookie(headers, COOKIE) {
        Some(code) => (Done::of(&code), true),
        None => (None, false),
    }
}

/// Adds the clearing of the confirmation cookie at `path` to a page's response.
pub fn cleared(state: &AppState, mut res: Response, path: &str) -> Response {
    res.headers_mut().append(SET_COOKIE, set_cookie(state, COOKIE, "", path, 0));
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use axum::http::header::COOKIE as COOKIE_HEADER;

    #[test]
    fn every_code_reads_back_as_itself_and_nothing_else_is_a_confirmation() {
        for d in Done::ALL {
            assert_eq!(Done::of(d.code()), Some(d));
            assert!(d.sentence().ends_with('.'));
        }
        let mut h = HeaderMap::new();
        h.insert(COOKIE_HEADER, HeaderValue::from_static("helix_done=<script>"));
        assert_eq!(take(&h), (None, true), "an unknown code shows nothing and is cleared");
        assert_eq!(take(&HeaderMap::new()), (None, false));
    }
}
