//! The claims of a signature-verified token, every rule explicit and mapped to one
//! `invalid_token` reason. Pure: no key, no clock of its own, no I/O.

use serde_json::{Map, Value};

use super::{CLOCK_LEEWAY_SECS, MAX_IDENTIFIER_CHARS, TENANT_CLAIMS, VerifiedToken, invalid};
use crate::error::ApiError;

/// The claims of a token for `issuer` and `audience` at `now` (epoch seconds).
pub(super) fn check(
    issuer: &str,
    audience: &str,
    claims: &Map<String, Value>,
    now: i64,
) -> Result<VerifiedToken, ApiError> {
    match claims.get("iss") {
        Some(Value::String(iss)) if iss == issuer => {}
        _ => return Err(invalid("issuer")),
    }
    let audience_ok = match claims.get("aud") {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    };
    if !audience_ok {
        return Err(invalid("audience"));
    }
    let expires_at = numeric_date(claims.get("exp"))?.ok_or(invalid("malformed"))?;
    if now > expires_at.saturating_add(CLOCK_LEEWAY_SECS) {
        return Err(invalid("expired"));
    }
    if let Some(nbf) = numeric_date(claims.get("nbf"))?
        && nbf > now.saturating_add(CLOCK_LEEWAY_SECS)
    {
        return Err(invalid("not_yet_valid"));
    }
    let subject = match claims.get("sub") {
        Some(Value::String(sub)) if is_identifier(sub) => sub.clone(),
        _ => return Err(invalid("subject")),
    };
    let tenant = signed_tenant(claims)?;
    let scopes = scopes(claims)?;
    Ok(VerifiedToken { issuer: issuer.to_owned(), subject, tenant, scopes, expires_at })
}

/// A NumericDate claim: absent is `None`, anything but a finite number is `malformed`.
fn numeric_date(v: Option<&Value>) -> Result<Option<i64>, ApiError> {
    match v {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f.floor() as i64))
            .map(Some)
            .ok_or(invalid("malformed")),
        Some(_) => Err(invalid("malformed")),
    }
}

/// Nonempty, at most [`MAX_IDENTIFIER_CHARS`] characters, no control characters.
fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.chars().count() <= MAX_IDENTIFIER_CHARS && !s.chars().any(char::is_control)
}

/// The signed tenant: the first of [`TENANT_CLAIMS`] present. Every present tenant
/// claim must be a valid identifier and all must agree.
pub(crate) fn signed_tenant(claims: &Map<String, Value>) -> Result<String, ApiError> {
    let mut tenant: Option<&str> = None;
    for name in TENANT_CLAIMS {
        let Some(value) = claims.get(name) else {
            continue;
        };
        let Some(s) = value.as_str().filter(|s| is_identifier(s)) else {
            return Err(invalid("tenant_claim"));
        };
        match tenant {
            None => tenant = Some(s),
            Some(first) if first == s => {}
            Some(_) => return Err(invalid("tenant_claim")),
        }
    }
    tenant.map(str::to_owned).ok_or(invalid("tenant_claim"))
}

/// Scopes from `scope` (space-separated string) or else `scp` (array of strings,
/// or a space-separated string as some providers send). Duplicates are dropped.
fn scopes(claims: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    };
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.split_ascii_whitespace().for_each(&mut push),
        (None, Some(Value::Array(items))) => {
            for item in items {
                let s = item.as_str().ok_or(invalid("malformed"))?;
                s.split_ascii_whitespace().for_each(&mut push);
            }
        }
        (None, None) => {}
        _ => return Err(invalid("malformed")),
    }
    Ok(out)
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    pub(in crate::auth::jwt) fn reason(e: ApiError) -> &'static str {
        match e {
            ApiError::InvalidToken { reason } => reason,
            other => panic!("expected invalid_token, got {other:?}"),
        }
    }

    #[test]
    fn the_first_tenant_claim_wins_and_conflicting_claims_are_rejected() {
        let t = signed_tenant(&map(json!({"org_id": "t1", "tenantId": "t1"}))).unwrap();
        assert_eq!(t, "t1");
        let e = signed_tenant(&map(json!({"tenantId": "t1", "customer_id": "t2"}))).unwrap_err();
        assert_eq!(reason(e), "tenant_claim");
        for bad in [json!({}), json!({"tenant_id": ""}), json!({"orgId": 7}), json!({"tenantId": "x".repeat(257)})] {
            assert_eq!(reason(signed_tenant(&map(bad)).unwrap_err()), "tenant_claim");
        }
    }

    #[test]
    fn scopes_come_from_scope_or_scp_without_duplicates() {
        let s = scopes(&map(json!({"scope": "a b  a", "scp": ["ignored"]}))).unwrap();
        assert_eq!(s, vec!["a", "b"]);
        assert_eq!(scopes(&map(json!({"scp": ["x", "y"]}))).unwrap(), vec!["x", "y"]);
        assert_eq!(scopes(&map(json!({"scp": "x y"}))).unwrap(), vec!["x", "y"]);
        assert!(scopes(&map(json!({}))).unwrap().is_empty());
        assert_eq!(reason(scopes(&map(json!({"scope": ["a"]}))).unwrap_err()), "malformed");
        assert_eq!(reason(scopes(&map(json!({"scp": [1]}))).unwrap_err()), "malformed");
    }

    #[test]
    fn numeric_dates_accept_integers_and_floats_only() {
        assert_eq!(numeric_date(Some(&json!(10))).unwrap(), Some(10));
        assert_eq!(numeric_date(Some(&json!(10.7))).unwrap(), Some(10));
        assert_eq!(numeric_date(None).unwrap(), None);
        assert_eq!(reason(numeric_date(Some(&json!("10"))).unwrap_err()), "malformed");
    }
}
