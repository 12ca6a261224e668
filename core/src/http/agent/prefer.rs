//! The `Prefer` request header (RFC 7240): whether a request asks to be answered
//! asynchronously (`respond-async`). Depends on nothing else in the crate.

use http::HeaderMap;

pub const PREFERENCE_APPLIED: &str = "preference-applied";
pub const RESPOND_ASYNC: &str = "respond-async";

/// Whether any `Prefer` header of `headers` names `respond-async`. Preferences are
/// comma-separated, each a token with an optional `=value` and `;` parameters; tokens
/// compare case-insensitively (RFC 7240, section 2). A preference the server does not
/// know is ignored, as the RFC asks, and so is a header that is not valid text.
pub fn respond_async(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::HeaderName::from_static("prefer"))
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|pref| pref.split(';').next())
        .map(|token| token.split('=').next().unwrap_or("").trim())
        .any(|token| token.eq_ignore_ascii_case(RESPOND_ASYNC))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefer(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("prefer", v.parse().unwrap());
        }
        h
    }

    #[test]
    fn respond_async_is_found_among_other_preferences_in_any_case() {
        assert!(respond_async(&prefer(&["respond-async"])));
        assert!(respond_async(&prefer(&["return=minimal, Respond-Async"])));
        assert!(respond_async(&prefer(&["wait=10", "respond-async; foo=bar"])));
    }

    #[test]
    fn other_preferences_or_none_ask_for_the_synchronous_answer() {
        assert!(!respond_async(&HeaderMap::new()));
        assert!(!respond_async(&prefer(&["return=representation"])));
        assert!(!respond_async(&prefer(&["respond-asynchronously", "x=respond-async"])));
    }
}
