//! The query and body rules the lanes share: routes that take no query, withdrawals that
//! take nothing but their path, and the event listing's `after_seq` and `limit` (the
//! agent-run events and the browser's twins read one rule).

use crate::domain::run::EventQuery;
use crate::error::ApiError;

/// Reads take no query: a caller-supplied filter (owner, account, …) is refused, not used.
pub fn no_query(query: Option<&str>) -> Result<(), ApiError> {
    match query {
        Some(q) if !q.is_empty() => Err(ApiError::InvalidRequest("this route takes no query parameters".into())),
        _ => Ok(()),
    }
}

/// A withdrawal takes only the opaque reference in the path: no query, no body.
pub fn empty_request(query: Option<&str>, body: &[u8]) -> Result<(), ApiError> {
    no_query(query)?;
    if !body.is_empty() {
        return Err(ApiError::InvalidRequest("this request takes no body".into()));
    }
    Ok(())
}

/// `after_seq` (default 0) and `limit` (default 50, 1-200): [`EventQuery`]'s rule.
pub fn event_query(raw: Option<&str>) -> Result<(u64, u32), ApiError> {
    let q = EventQuery::parse(raw)?;
    Ok((q.after_seq, q.limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn withdrawals_refuse_any_query_or_body() {
        assert!(empty_request(None, b"").is_ok());
        assert!(empty_request(Some(""), b"").is_ok());
        assert!(empty_request(Some("run_id=run_x"), b"").is_err());
        assert!(empty_request(None, b"{}").is_err());
    }

    #[test]
    fn event_query_defaults_and_refuses_unknown_parameters() {
        assert_eq!(event_query(None).unwrap(), (0, 50));
        assert_eq!(event_query(Some("after_seq=41&limit=100")).unwrap(), (41, 100));
        assert!(event_query(Some("after_seq=-1")).is_err());
        assert!(event_query(Some("cursor=9")).is_err());
        assert!(event_query(Some("chat_id=x")).is_err(), "the observer lane parses with it too");
    }
}
