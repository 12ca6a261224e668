//! Credential-shaped value detection: used for request ids, error messages and
//! anything else that could echo caller input.

pub use crate::domain::credential::{
    identifier_carries_credential, is_trace_context_id, looks_like_credential, text_carries_credential,
};

/// A caller's request id is kept when short, plain and not credential-shaped; a W3C
/// trace id or `traceparent` value is kept as it is (see [`is_trace_context_id`]).
pub fn safe_request_id(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 160
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        && (is_trace_context_id(value) || !looks_like_credential(value))
}

/// Removes quoted and back-ticked fragments from a parser message, so a bad value
/// is never echoed; the rest (position, expected type) stays helpful.
pub fn scrub_message(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut inside: Option<char> = None;
    for c in msg.chars() {
        match inside {
            Some(q) if c == q => {
                inside = None;
                out.push(c);
            }
            Some(_) => {}
            None if c == '"' || c == '`' => {
                inside = Some(if c == '`' { '`' } else { '"' });
                out.push(c);
                out.push('…');
            }
            None => out.push(c),
        }
    }
    out
}

/// The name of an unknown field, when it is safe to echo.
pub fn unknown_field_name(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("unknown field `")?;
    let name = &rest[..rest.find('`')?];
    (name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && !looks_like_credential(name))
        .then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_shaped_request_ids_are_refused() {
        assert!(safe_request_id("client-req-42"));
        assert!(safe_request_id("trace:abc.def_1"));
        assert!(!safe_request_id("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlc2ln"));
        assert!(!safe_request_id("sk-live-abc"));
        assert!(!safe_request_id("Bearer_abc"));
        assert!(!safe_request_id("0123456789abcdef0123456789abcdef0123"), "a hex run longer than a trace id");
        assert!(!safe_request_id("0123456789ABCDEF0123456789ABCDEF"), "uppercase hex is no W3C trace id");
        assert!(!safe_request_id("3f786850e387550fdab836ed7e6dc881de23001b"));
        assert!(!safe_request_id("00000000000000000000000000000000"), "the invalid all-zero trace id");
        assert!(!safe_request_id("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"), "three parts");
        assert!(!safe_request_id("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), "version ff");
        assert!(!safe_request_id("sk-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        assert!(!safe_request_id("00-0af7651916cd43dd8448eb211c80319c0af7651916cd43dd-b7ad6b7169203331-01"));
        assert!(!safe_request_id(&"a-".repeat(81)));
        assert!(!safe_request_id("has space"));
    }

    #[test]
    fn w3c_trace_ids_and_traceparent_values_are_kept() {
        assert!(safe_request_id("0af7651916cd43dd8448eb211c80319c"));
        assert!(safe_request_id("0123456789abcdef0123456789abcdef"));
        assert!(safe_request_id("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        assert!(safe_request_id("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"));
    }

    #[test]
    fn free_text_is_refused_only_when_it_carries_a_credential() {
        for prose in [
            "How do bearer tokens and API keys differ in token-based auth?",
            "Measure the Casimir force; password policy is out of scope.",
            "The token: a unit of text",
            "Asian and Asia-Pacific labs; xoxo",
            "See https://www.researchgate.net/publication/12345678_Demonstration_of_the_Casimir_Force",
            "Compare /wiki/Casimir_effect_and_the_proximity_force_approximation pages",
            "Lamoreaux_1997_torsion_pendulum_measurement_and_follow_ups",
            "ProximityForceApproximationForSpheres",
            "the sk-learn and sk_ prefixes",
        ] {
            assert!(!text_carries_credential(prose), "{prose}");
        }
        assert!(text_carries_credential("run_0123456789abcdef0123456789abcdef"), "a long run in prose");
        for secret in [
            "use Authorization: Bearer abcdefgh12345678",
            "my key is sk-live-0123",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
            "password=hunter2hunter2",
            "api_key: \"AKIA0123456789\"",
            "0123456789abcdef0123456789abcdef0123",
            "(ghp_abcdefghijkl0123)",
            "AKIAIOSFODNN7EXAMPLE",
            "wJalrXUtnFEMIK7MDENGbPxRfiCYzq/Xw+Lk9 is the secret",
            "3f786850e387550fdab836ed7e6dc881de23001b",
            "xoxb-1234567890-abcdef",
        ] {
            assert!(text_carries_credential(secret), "{secret}");
        }
        assert!(!identifier_carries_credential("run_0123456789abcdef0123456789abcdef"));
        assert!(!identifier_carries_credential("conf-py-start-0123456789abcdef0123456789abcdef"));
        assert!(identifier_carries_credential("sk-live-0123456789"));
        assert!(identifier_carries_credential("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"));
    }

    #[test]
    fn parser_messages_lose_their_quoted_values() {
        let m = scrub_message("invalid type: string \"sk-secret\", expected u64 at line 1 column 30");
        assert!(!m.contains("sk-secret"));
        assert!(m.contains("expected u64"));
        assert_eq!(unknown_field_name("unknown field `owner`, expected one of"), Some("owner"));
        assert_eq!(unknown_field_name("unknown field `eyJhbGciOiJIUzI1NiJ9xxxxxxxxxxxxxxxxxxxx`, x"), None);
    }
}
