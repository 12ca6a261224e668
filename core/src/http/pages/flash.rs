//! One-time confirmations after a form's post/redirect/get ("Action authority granted…"):
//! the form's answer is a `303` that also sets a short-lived cookie naming what was done (a
//! code of [`Done`], never caller text), and the page it leads to shows that sentence once
//! and clears the cookie. Nothing is stored and nothing the caller sent is reflected: an
//! unknown code is ignored.

use axum::http::HeaderMap;
use axum::http::header::SET_COOKIE;
use axum::response::Response;

use super::{cookie, see_other, set_cookie};
use crate::http::AppState;

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

    /// Its code (the cookie's value) and the sentence the page shows, in one place.
    fn text(self) -> (&'static str, &'static str) {
        match self {
            Done::Joined => ("joined", "You joined the room."),
            Done::ConsentAccepted => {
                ("consent_accepted", "Consent accepted: you can bind your runs to the room again.")
            }
            Done::ConsentRaised => {
                ("consent_raised", "Consent version raised: every member accepts it again before their next bind.")
            }
            Done::MemberRemoved => ("member_removed", "The member was removed from the room."),
            Done::AuthorityGranted => {
                ("authority_granted", "Action authority granted: the member's agent may drive the player they select.")
            }
            Done::AuthorityRevoked => {
                ("authority_revoked", "Action authority revoked: the member's agent can no longer act.")
            }
            Done::RoomStopped => (
                "room_stopped",
                "Emergency Stop: every player of this room is stopped; new actions are refused until you clear it.",
            ),
            Done::RoomStopCleared => {
                ("room_stop_cleared", "The room's Emergency Stop is cleared: new actions are allowed again.")
            }
            Done::SubjectSelected => ("subject_selected", "Player selected: your agent acts through this player only."),
            Done::SubjectStopped => (
                "subject_stopped",
                "Emergency Stop: your player is stopped; new actions on it are refused until you clear it.",
            ),
            Done::SubjectStopCleared => ("subject_stop_cleared", "Your player's Emergency Stop is cleared."),
            Done::PairingRevoked => {
                ("pairing_revoked", "The pairing is revoked: its connector is refused from now on.")
            }
            Done::RegionSet => ("region_set", "Region set: an action outside it is refused."),
            Done::RegionCleared => ("region_cleared", "Region cleared."),
        }
    }

    fn code(self) -> &'static str {
        self.text().0
    }

    /// The sentence the page shows.
    pub fn sentence(self) -> &'static str {
        self.text().1
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
fn take(headers: &HeaderMap) -> (Option<Done>, bool) {
    match cookie(headers, COOKIE) {
        Some(code) => (Done::of(&code), true),
        None => (None, false),
    }
}

/// The page at `path`, rendered by `page` with the sentence of what the form before it did
/// (if anything), and the confirmation cookie cleared when the request carried one.
pub fn shown(
    state: &AppState,
    headers: &HeaderMap,
    path: &str,
    page: impl FnOnce(Option<&'static str>) -> Response,
) -> Response {
    let (done, clear) = take(headers);
    let mut res = page(done.map(Done::sentence));
    if clear {
        res.headers_mut().append(SET_COOKIE, set_cookie(state, COOKIE, "", path, 0));
    }
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
