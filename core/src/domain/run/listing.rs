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

/// The wire names of a status enum, from its JSON Schema (the same type the runs carry).
fn names<T: schemars::JsonSchema>() -> String {
    let schema = schemars::schema_for!(T);
    let names: Vec<&str> =
        schema.get("enum").and_then(|e| e.as_array()).into_iter().flatten().filter_map(|v| v.as_str()).collect();
    names.join(", ")
}

/// What a `status` may be: every lifecycle and completion status, by name.
fn allowed_statuses() -> &'static str {
    static ALLOWED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ALLOWED.get_or_init(|| {
        format!("give a lifecycle status ({}) or a completion status ({})", names::<Lifecycle>(), names::<Completion>())
    })
}

impl StatusFilter {
    /// The filter a `status` value names; an unknown name is `invalid_request`.
    pub fn parse(name: &str) -> Result<Self, QueryInvalid> {
        match (parse::<Lifecycle>(name), parse::<Completion>(name)) {
            (Some(l), Some(c)) => Ok(StatusFilter::Both(l, c)),
            (Some(l), None) => Ok(StatusFilter::Lifecycle(l)),
            (None, Some(c)) => Ok(StatusFilter::Completion(c)),
            (None, None) => Err(QueryInvalid(format!("status: unknown value; {}", allowed_statuses()))),
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
        let values = crate::domain::page::query_values(
            raw,
            &[("status", allowed_statuses()), crate::domain::page::cursor_param()],
        )?;
        Ok(RunListQuery {
            status: values[0].map(StatusFilter::parse).transpose()?.unwrap_or_default(),
            cursor: values[1].map(str::to_owned),
        })
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

    #[test]
    fn each_refusal_says_what_is_wrong_and_what_is_allowed() {
        let said = |q: &str| RunListQuery::parse(Some(q)).expect_err(q).0;
        let allowed = "give a lifecycle status (queued, running, waiting, completed, failed, cancelled) or a \
                       completion status (pending, completed, needs_more_evidence, needs_input, conflict_detected, \
                       blocked, failed, budget_exhausted, cancelled)";
        for empty in ["status=", "status", "status=&cursor=hpc1_x"] {
            assert_eq!(said(empty), format!("status: empty value; {allowed}"), "{empty}");
        }
        assert_eq!(said("status=nope"), format!("status: unknown value; {allowed}"));
        assert_eq!(said("status=running&status=waiting"), "status: give it once");
        assert_eq!(
            said("cursor="),
            "cursor: empty value; give the next_cursor of the previous page, or no cursor for the first page"
        );
        assert_eq!(said("cursor=a&cursor=b"), "cursor: give it once");
        assert_eq!(said("limit=5"), "the only query parameters are status, cursor");
        assert!(!said("status=secret-value-x").contains("secret-value-x"), "the value is not quoted back");
    }
}
