//! Listing runs: the `status` filter and the query of a run listing (`status`, `cursor`;
//! nothing else). A status names either a lifecycle status or a completion status, as
//! the run is observed (a run held by a turn reads `running`). Pure; no I/O.

use serde::Deserialize;

use super::{Completion, Lifecycle};
use crate::domain::page::QueryInvalid;
use crate::domain::wire::RunView;

/// The runs a listing keeps: every run, or those whose observed lifecycle or completion
/// status has this name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatusFilter {
    #[default]
    Any,
    Lifecycle(Lifecycle),
    Completion(Completion),
    /// A name that is both (`completed`, `failed`, `cancelled`): either matches.
    Both(Lifecycle, Completion),
}

fn parse<T: for<'de> Deserialize<'de>>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

impl StatusFilter {
    /// The filter a `status` value names; an unknown name is `invalid_request`.
    pub fn parse(name: &str) -> Result<Self, QueryInvalid> {
        match (parse::<Lifecycle>(name), parse::<Completion>(name)) {
            (Some(l), Some(c)) => Ok(StatusFilter::Both(l, c)),
            (Some(l), None) => Ok(StatusFilter::Lifecycle(l)),
            (None, Some(c)) => Ok(StatusFilter::Completion(c)),
            (None, None) => Err(QueryInvalid(
                "status: must be a lifecycle status (queued, running, waiting, completed, failed, cancelled) or a \
                 completion status (pending, needs_more_evidence, needs_input, conflict_detected, blocked, \
                 budget_exhausted, ...)"
                    .into(),
            )),
        }
    }

    /// True when the observed run is kept.
    pub fn keeps(self, run: &RunView) -> bool {
        match self {
            StatusFilter::Any => true,
            StatusFilter::Lifecycle(l) => run.lifecycle_status == l,
            StatusFilter::Completion(c) => run.completion_status == c,
            StatusFilter::Both(l, c) => run.lifecycle_status == l || run.completion_status == c,
        }
    }
}

/// The query of a run listing: `status` and `cursor`, each at most once and non-empty;
/// any other parameter is `invalid_request`, as on the other listings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunListQuery {
    pub status: StatusFilter,
    pub cursor: Option<String>,
}

impl RunListQuery {
    pub fn parse(raw: Option<&str>) -> Result<Self, QueryInvalid> {
        let mut q = RunListQuery::default();
        let (mut status_seen, mut cursor_seen) = (false, false);
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("status", v)) if !status_seen && !v.is_empty() => {
                    status_seen = true;
                    q.status = StatusFilter::parse(v)?;
                }
                Some(("cursor", v)) if !cursor_seen && !v.is_empty() => {
                    cursor_seen = true;
                    q.cursor = Some(v.to_owned());
                }
                Some(("status", _)) => return Err(QueryInvalid("status: give it once".into())),
                Some(("cursor", _)) => return Err(crate::domain::page::invalid()),
                _ => return Err(QueryInvalid("the only query parameters are status and cursor".into())),
            }
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_takes_status_and_cursor_once_and_nothing_else() {
        assert_eq!(RunListQuery::parse(None).unwrap(), RunListQuery::default());
        let q = RunListQuery::parse(Some("status=running&cursor=hpc1_x")).unwrap();
        assert_eq!(q.status, StatusFilter::Lifecycle(Lifecycle::Running));
        assert_eq!(q.cursor.as_deref(), Some("hpc1_x"));
        assert_eq!(
            RunListQuery::parse(Some("status=needs_input")).unwrap().status,
            StatusFilter::Completion(Completion::NeedsInput)
        );
        assert_eq!(
            RunListQuery::parse(Some("status=cancelled")).unwrap().status,
            StatusFilter::Both(Lifecycle::Cancelled, Completion::Cancelled)
        );
        for bad in ["status=", "status=nope", "status=running&status=waiting", "cursor=", "limit=5", "owner=x"] {
            assert!(RunListQuery::parse(Some(bad)).is_err(), "{bad}");
        }
    }
}
