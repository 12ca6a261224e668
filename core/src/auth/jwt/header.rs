//! The bearer's outer form: the `Authorization` header's token, and the protected
//! header of a compact JWS read before any key is looked up. No key or claim here.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

use super::{MAX_BEARER_BYTES, invalid};
use crate::error::ApiError;

/// The token of an `Authorization` header value: scheme `Bearer` (any case), one
/// or more spaces, then exactly one RFC 6750 b64token.
pub fn bearer_from_header(value: &str) -> Option<&str> {
    let value = value.trim_matches(|c| c == ' ' || c == '\t');
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ');
    let body = token.trim_end_matches('=');
    let valid = !body.is_empty()
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'));
    valid.then_some(token)
}

/// The two protected-header fields needed to pick a key. `jsonwebtoken` parses
/// the full header again when it verifies (and rejects unsupported `crit`).
#[derive(Debug)]
pub(super) struct RawHeader {
    pub(super) alg: String,
    pub(super) kid: Option<String>,
}

/// Structural checks and the protected header, before any key is looked up.
pub(super) fn parse_header(bearer: &str) -> Result<RawHeader, ApiError> {
    if bearer.is_empty() || bearer.len() > MAX_BEARER_BYTES {
        return Err(invalid("malformed"));
    }
    let segments: Vec<&str> = bearer.split('.').collect();
    let well_formed = segments.len() == 3
        && segments
            .iter()
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    if !well_formed {
        return Err(invalid("malformed"));
    }
    let bytes = URL_SAFE_NO_PAD.decode(segments[0]).map_err(|_| invalid("malformed"))?;
    let header: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|_| invalid("malformed"))?;
    let alg = match header.get("alg") {
        Some(Value::String(alg)) => alg.clone(),
        _ => return Err(invalid("malformed")),
    };
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(invalid("malformed")),
    };
    Ok(RawHeader { alg, kid })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::jwt::claims::tests::reason;

    #[test]
    fn bearer_scheme_is_case_insensitive_and_takes_exactly_one_token() {
        assert_eq!(bearer_from_header("Bearer abc.def.ghi"), Some("abc.def.ghi"));
        assert_eq!(bearer_from_header("bearer abc"), Some("abc"));
        assert_eq!(bearer_from_header("BEARER   abc=="), Some("abc=="));
        assert_eq!(bearer_from_header("Bearer"), None);
        assert_eq!(bearer_from_header("Bearer "), None);
        assert_eq!(bearer_from_header("Bearer a b"), None);
        assert_eq!(bearer_from_header("Bearer a,b"), None);
        assert_eq!(bearer_from_header("Basic YWxhZGRpbjpvcGVu"), None);
        assert_eq!(bearer_from_header("Bearerabc"), None);
        assert_eq!(bearer_from_header("Bearer ="), None);
    }

    #[test]
    fn headers_are_parsed_only_from_three_base64url_segments() {
        assert_eq!(reason(parse_header("").unwrap_err()), "malformed");
        assert_eq!(reason(parse_header("a.b").unwrap_err()), "malformed");
        assert_eq!(reason(parse_header("a.b.c.d.e").unwrap_err()), "malformed");
        assert_eq!(reason(parse_header("a+.b.c").unwrap_err()), "malformed");
        let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","kid":"k1"}"#);
        let parsed = parse_header(&format!("{h}.e30.c2ln")).unwrap();
        assert_eq!((parsed.alg.as_str(), parsed.kid.as_deref()), ("RS256", Some("k1")));
        let long = format!("{h}.{}.c2ln", "A".repeat(MAX_BEARER_BYTES));
        assert_eq!(reason(parse_header(&long).unwrap_err()), "malformed");
    }
}
