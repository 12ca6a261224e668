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

/// The names a `status` filter takes, as published: every lifecycle and every completion
/// status (the same serde names [`StatusFilter::parse`] reads).
impl schemars::JsonSchema for StatusFilter {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StatusFilter".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names = |schema: schemars::Schema| -> Vec<serde_json::Value> {
            schema.get("enum").and_then(serde_json::Value::as_array).cloned().expect("a unit enum's schema")
        };
        let mut all = names(schemars::schema_for!(Lifecycle));
        for name in names(schemars::schema_for!(Completion)) {
            if !all.contains(&name) {
                all.push(name);
            }
        }
        schemars::json_schema!({"type": "string", "enum": all,
            "description": "A lifecycle or a completion status; a name that is both matches either."})
    }
}

/// The query of a run listing, as published (what [`RunListQuery::parse`] reads).
#[derive(schemars::JsonSchema)]
#[schemars(rename = "RunListQuery", deny_unknown_fields)]
#[allow(dead_code)]
pub struct RunListParams {
    status: Option<StatusFilter>,
    cursor: Option<crate::domain::page::CursorParam>,
}

/// How many events a page may ask for.
pub const EVENT_LIMIT: std::ops::RangeInclusive<u32> = 1..=200;
/// The events a page holds when it does not say.
pub const DEFAULT_EVENT_LIMIT: u32 = 50;

/// The query of an event page: `after_seq` (default 0) and `limit` (default 50, within
/// [`EVENT_LIMIT`]); any other parameter is refused. The published schema is this type's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EventQuery {
    /// Only events after this sequence number.
    #[schemars(range(min = 0, max = u64::MAX))]
    pub after_seq: u64,
    /// The most events one page holds.
    #[schemars(range(min = *EVENT_LIMIT.start(), max = *EVENT_LIMIT.end()))]
    pub limit: u32,
}

impl Default for EventQuery {
    fn default() -> Self {
        EventQuery { after_seq: 0, limit: DEFAULT_EVENT_LIMIT }
    }
}

impl EventQuery {
    pub fn parse(raw: Option<&str>) -> Result<Self, QueryInvalid> {
        let mut q = EventQuery::default();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let bad = |n: &str| QueryInvalid(format!("{n}: must be a whole number"));
            match name {
                "after_seq" => q.after_seq = value.parse().map_err(|_| bad("after_seq"))?,
                "limit" => q.limit = value.parse().map_err(|_| bad("limit"))?,
                _ => return Err(QueryInvalid("unknown query parameter".into())),
            }
        }
        check_event_limit(q.limit)?;
        Ok(q)
    }
}

/// The one bound of an event page's `limit` (REST and MCP).
pub fn check_event_limit(limit: u32) -> Result<(), QueryInvalid> {
    if EVENT_LIMIT.contains(&limit) {
        Ok(())
    } else {
        Err(QueryInvalid(format!("limit: must be {}-{}", EVENT_LIMIT.start(), EVENT_LIMIT.end())))
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
    fn the_event_query_defaults_bounds_the_limit_and_refuses_unknown_parameters() {
        assert_eq!(EventQuery::parse(None).unwrap(), EventQuery { after_seq: 0, limit: 50 });
        assert_eq!(
            EventQuery::parse(Some("after_seq=41&limit=100")).unwrap(),
            EventQuery { after_seq: 41, limit: 100 }
        );
        assert_eq!(EventQuery::parse(Some("limit=200")).unwrap().limit, 200);
        for bad in ["after_seq=-1", "limit=0", "limit=201", "cursor=9", "chat_id=x"] {
            assert!(EventQuery::parse(Some(bad)).is_err(), "{bad}");
        }
    }

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
