//! Signed-out visitors of a page: [`PageSession`] is the page handlers' session extractor.
//! With no live session it answers `303 See Other` to the sign-in page, `/account`, with
//! the page asked for as `return_to` (validated: a path on this origin only), and the
//! sign-in comes back there. JSON routes keep [`super::BrowserSession`] and its
//! typed 401. Also the `return_to` of a query or form, and `GET` on a form's action.

use axum::extract::FromRequestParts;
use axum::response::{IntoResponse, Response};
use http::Uri;
use http::request::Parts;

use super::{SIGN_IN_PAGE, pairs, see_other, session_of};
use crate::domain::account::ReturnPath;
use crate::http::AppState;
use crate::service::sessions::Session;

pub const RETURN_TO: &str = "return_to";

/// A signed-in browser on a page (read-only: whatever acts takes
/// [`super::SameOriginSession`]); signed out, the visitor is sent to sign in.
pub struct PageSession(pub Session);

impl FromRequestParts<AppState> for PageSession {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        match session_of(state, &parts.headers).await {
            Ok(Some(session)) => Ok(PageSession(session)),
            Ok(None) => Err(see_other(&sign_in_location(&parts.uri))),
            Err(e) => Err(e.into_response()),
        }
    }
}

/// The sign-in page that comes back to `uri` (its path and query) when that is a return
/// path, else the plain sign-in page.
pub fn sign_in_location(uri: &Uri) -> String {
    let asked = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    match ReturnPath::parse(asked) {
        Some(back) => with_return_to(SIGN_IN_PAGE, Some(&back)),
        None => SIGN_IN_PAGE.to_owned(),
    }
}

/// `path?return_to=…` (percent-encoded), or `path` without one.
pub fn with_return_to(path: &str, back: Option<&ReturnPath>) -> String {
    match back {
        Some(back) => {
            let encoded: String =
                openidconnect::url::form_urlencoded::byte_serialize(back.as_str().as_bytes()).collect();
            format!("{path}?{RETURN_TO}={encoded}")
        }
        None => path.to_owned(),
    }
}

/// The `return_to` of a query, if it is one valid return path (absent, repeated or unsafe:
/// none, so the sign-in lands on the account page).
pub fn return_to_of_query(raw: Option<&str>) -> Option<ReturnPath> {
    let pairs = pairs(raw.unwrap_or(""));
    let mut values = pairs.iter().filter(|(k, _)| k == RETURN_TO).map(|(_, v)| v);
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    ReturnPath::parse(first)
}

/// `GET` on a form's action path (a reload after the post, a bookmark): the page the form
/// is on, never a 405.
pub async fn to_sign_in_page() -> Response {
    see_other(SIGN_IN_PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_out_visitor_is_sent_to_sign_in_with_the_page_asked_for() {
        let at = |u: &str| sign_in_location(&u.parse::<Uri>().unwrap());
        assert_eq!(at("/rooms"), "/account?return_to=%2Frooms");
        assert_eq!(at("/runs?status=running&cursor=c1"), "/account?return_to=%2Fruns%3Fstatus%3Drunning%26cursor%3Dc1");
        assert_eq!(at("//evil.example/rooms"), "/account", "never a return path to another host");
    }

    #[test]
    fn a_query_names_one_safe_return_path_or_none() {
        let of = |q: &str| return_to_of_query(Some(q)).map(|r| r.as_str().to_owned());
        assert_eq!(of("return_to=%2Frooms").as_deref(), Some("/rooms"));
        assert_eq!(of("return_to=%2Fruns%3Fstatus%3Drunning").as_deref(), Some("/runs?status=running"));
        for bad in [
            "return_to=%2F%2Fevil.example",
            "return_to=https%3A%2F%2Fevil.example",
            "return_to=%2F%5Cevil.example",
            "return_to=%2Frooms&return_to=%2Fruns",
            "return_to=",
            "other=%2Frooms",
        ] {
            assert_eq!(of(bad), None, "{bad}");
        }
        assert_eq!(return_to_of_query(None), None);
    }
}
