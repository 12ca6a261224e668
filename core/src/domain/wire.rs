//! Wire DTOs: the public JSON of runs, evidence bundles, events, event pages and the
//! error envelope. Each type both serializes the REST and MCP bodies and derives the
//! JSON Schema the MCP catalog publishes as a tool's `outputSchema`, so the published
//! schema and the served JSON cannot drift apart. Pure: depends on `domain` only.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use super::event::{EVENT_SCHEMA, Event};
use super::run::{
    Authority, Completion, CompletionContract, Contradiction, EvidenceItem, EvidenceRefs, LatestResult, Lifecycle,
    NextAction, Ownership, Question, RUN_SCHEMA, RUNTIME_PROVIDER, Requirement, Run,
};

pub const EVIDENCE_BUNDLE_SCHEMA: &str = "helix.agent_run.evidence_bundle.v1";
pub const EVENT_PAGE_SCHEMA: &str = "helix.agent_run.event_page.v1";
pub const ERROR_SCHEMA: &str = "helix.agent_api.error.v1";
pub const RUN_LIST_SCHEMA: &str = "helix.agent_run_list.v1";

/// A string that is always the same value: serializes as it, and its schema is `const`.
macro_rules! constant {
    ($(#[$doc:meta])* $name:ident = $value:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name;

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($value)
            }
        }

        impl JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({ "type": "string", "const": $value })
            }
        }
    };
}

pub(crate) use constant;

constant!(
    /// `helix.agent_run.v1`
    RunSchemaName = RUN_SCHEMA
);
constant!(
    /// `helix.agent_run.evidence_bundle.v1`
    EvidenceBundleSchemaName = EVIDENCE_BUNDLE_SCHEMA
);
constant!(
    /// `helix.agent_run.event.v1`
    EventSchemaName = EVENT_SCHEMA
);
constant!(
    /// `helix.agent_run.event_page.v1`
    EventPageSchemaName = EVENT_PAGE_SCHEMA
);
constant!(
    /// `helix.agent_run_list.v1`
    RunListSchemaName = RUN_LIST_SCHEMA
);
constant!(
    /// `helix.agent_api.error.v1`
    ErrorSchemaName = ERROR_SCHEMA
);
constant!(
    /// `helix_ask`
    RuntimeProvider = RUNTIME_PROVIDER
);

/// A flag that is always `false`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct False;

impl Serialize for False {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(false)
    }
}

impl JsonSchema for False {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "False".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "boolean", "const": false })
    }
}

/// The four flags the contract keeps on every run, evidence bundle, event, event page
/// and MCP result: a status record is never an answer, whatever its authority status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NotAnAnswer {
    pub answer_authority: False,
    pub assistant_answer: False,
    pub terminal_eligible: False,
    pub raw_content_included: False,
}

/// The run's step budget as published (with the derived `steps_remaining`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BudgetView {
    pub max_steps: u32,
    pub steps_used: u32,
    pub steps_remaining: u32,
    #[schemars(with = "String")]
    pub expires_at: DateTime<Utc>,
}

/// `helix.agent_run.v1`: the run as REST and MCP publish it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RunView {
    pub schema: RunSchemaName,
    pub run_id: String,
    pub ownership: Ownership,
    pub objective: String,
    pub objective_hash: String,
    pub runtime_provider: RuntimeProvider,
    pub lifecycle_status: Lifecycle,
    pub completion_status: Completion,
    pub terminal_authority_status: Authority,
    #[schemars(range(min = 1))]
    pub version: u64,
    pub completion_contract: CompletionContract,
    pub constraints: Vec<String>,
    pub database_scope: Vec<String>,
    pub budget: BudgetView,
    pub unresolved_requirements: Vec<Requirement>,
    pub contradictions: Vec<Contradiction>,
    pub pending_questions: Vec<Question>,
    pub evidence: EvidenceRefs,
    pub latest_result: Option<LatestResult>,
    /// `wait` while a turn holds the run (its statuses then read `running` / `pending`).
    pub recommended_next_action: NextAction,
    #[schemars(with = "String")]
    pub created_at: DateTime<Utc>,
    #[schemars(with = "String")]
    pub updated_at: DateTime<Utc>,
    #[schemars(with = "Option<String>")]
    pub completed_at: Option<DateTime<Utc>>,
    #[schemars(with = "Option<String>")]
    pub cancelled_at: Option<DateTime<Utc>>,
    #[serde(flatten)]
    pub flags: NotAnAnswer,
}

impl RunView {
    /// The stored run as published.
    pub fn of(run: &Run) -> Self {
        RunView {
            schema: RunSchemaName,
            run_id: run.run_id.clone(),
            ownership: run.ownership.clone(),
            objective: run.objective.clone(),
            objective_hash: run.objective_hash(),
            runtime_provider: RuntimeProvider,
            lifecycle_status: run.lifecycle_status,
            completion_status: run.completion_status,
            terminal_authority_status: run.terminal_authority_status,
            version: run.version,
            completion_contract: run.completion_contract.clone(),
            constraints: run.constraints.clone(),
            database_scope: run.database_scope.clone(),
            budget: BudgetView {
                max_steps: run.budget.max_steps,
                steps_used: run.budget.steps_used,
                steps_remaining: run.budget.max_steps.saturating_sub(run.budget.steps_used),
                expires_at: run.budget.expires_at,
            },
            unresolved_requirements: run.unresolved_requirements.clone(),
            contradictions: run.contradictions.clone(),
            pending_questions: run.pending_questions.clone(),
            evidence: run.evidence.clone(),
            latest_result: run.latest_result.clone(),
            recommended_next_action: run.next_action(),
            created_at: run.created_at,
            updated_at: run.updated_at,
            completed_at: run.completed_at,
            cancelled_at: run.cancelled_at,
            flags: NotAnAnswer::default(),
        }
    }

    /// The run as observed at `now_epoch`: while a turn holds a live claim it is
    /// `running` / `pending` with `wait` (the stored statuses resume when it finalizes).
    pub fn observed(run: &Run, now_epoch: i64) -> Self {
        let mut view = Self::of(run);
        if run.live_claim(now_epoch).is_some() {
            view.lifecycle_status = Lifecycle::Running;
            view.completion_status = Completion::Pending;
            view.recommended_next_action = NextAction::Wait;
        }
        view
    }
}

/// `helix.agent_run.evidence_bundle.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EvidenceBundleView {
    pub schema: EvidenceBundleSchemaName,
    pub run_id: String,
    #[schemars(range(min = 1))]
    pub version: u64,
    pub observation_refs: Vec<String>,
    pub evidence_refs: Vec<String>,
    pub receipt_refs: Vec<String>,
    pub evidence: Vec<EvidenceItem>,
    pub supported_claims: Vec<String>,
    pub contradicted_claims: Vec<Contradiction>,
    pub unresolved_requirements: Vec<Requirement>,
    pub terminal_candidate_ref: Option<String>,
    pub terminal_authority_status: Authority,
    #[serde(flatten)]
    pub flags: NotAnAnswer,
}

impl EvidenceBundleView {
    pub fn of(run: &Run) -> Self {
        EvidenceBundleView {
            schema: EvidenceBundleSchemaName,
            run_id: run.run_id.clone(),
            version: run.version,
            observation_refs: run.evidence.observation_refs.clone(),
            evidence_refs: run.evidence.evidence_refs.clone(),
            receipt_refs: run.evidence.receipt_refs.clone(),
            evidence: run.evidence_items.clone(),
            supported_claims: run.supported_claims.clone(),
            contradicted_claims: run.contradictions.clone(),
            unresolved_requirements: run.unresolved_requirements.clone(),
            terminal_candidate_ref: run.terminal_candidate_ref.clone(),
            terminal_authority_status: run.terminal_authority_status,
            flags: NotAnAnswer::default(),
        }
    }
}

/// `helix.agent_run.event.v1`: a stored event with the four false flags.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EventView {
    pub schema: EventSchemaName,
    pub run_id: String,
    #[schemars(range(min = 1))]
    pub seq: u64,
    pub kind: super::event::EventKind,
    pub version: u64,
    #[schemars(with = "String")]
    pub created_at: DateTime<Utc>,
    /// Kind-specific detail (identifiers, counts and statuses; never raw content).
    #[schemars(with = "serde_json::Value")]
    pub data: super::event::EventData,
    #[serde(flatten)]
    pub flags: NotAnAnswer,
}

impl From<Event> for EventView {
    fn from(e: Event) -> Self {
        let kind = e.kind();
        EventView {
            schema: EventSchemaName,
            run_id: e.run_id,
            seq: e.seq,
            kind,
            version: e.version,
            created_at: e.created_at,
            data: e.data,
            flags: NotAnAnswer::default(),
        }
    }
}

/// `helix.agent_run.event_page.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EventPageView {
    pub schema: EventPageSchemaName,
    pub run_id: String,
    pub events: Vec<EventView>,
    /// The `after_seq` of the next page (the last event's `seq`, or the request's `after_seq`).
    pub next_after_seq: u64,
    pub has_more: bool,
    #[serde(flatten)]
    pub flags: NotAnAnswer,
}

impl EventPageView {
    pub fn new(run_id: &str, events: Vec<Event>, after_seq: u64, has_more: bool) -> Self {
        let next_after_seq = events.last().map(|e| e.seq).unwrap_or(after_seq);
        EventPageView {
            schema: EventPageSchemaName,
            run_id: run_id.to_owned(),
            events: events.into_iter().map(EventView::from).collect(),
            next_after_seq,
            has_more,
            flags: NotAnAnswer::default(),
        }
    }
}

/// `helix.agent_run_list.v1`: one page of runs, newest first, each as inspect shows it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RunListView {
    pub schema: RunListSchemaName,
    pub runs: Vec<RunView>,
    pub has_more: bool,
    /// The `cursor` of the next page; null on the last page. A page filtered by `status`
    /// may hold fewer runs than the page size (even none) and still have a next page.
    pub next_cursor: Option<String>,
    #[serde(flatten)]
    pub flags: NotAnAnswer,
}

/// `helix.agent_api.error.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ErrorEnvelope {
    pub schema: ErrorSchemaName,
    pub error: ErrorDetail,
    pub request_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ErrorDetail {
    /// A stable code (docs/wire.md).
    pub code: String,
    pub message: String,
    pub retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub details: Option<serde_json::Value>,
}

/// A failed MCP tool call's `structuredContent`: the error envelope, plus the four
/// false flags every MCP result carries.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct McpErrorView {
    #[serde(flatten)]
    pub envelope: ErrorEnvelope,
    #[serde(flatten)]
    pub flags: NotAnAnswer,
}

/// Serializes a wire DTO into the `Value` the services hand to REST and MCP.
pub fn to_value(view: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(view).expect("wire DTOs serialize to JSON")
}

/// A run view serialized once (the text of a JSON object), with the version its ETag
/// names: REST writes the text as the body, MCP as the result's content and its text
/// copy. No `Value` tree is built for the hottest read.
#[derive(Debug, Clone, PartialEq)]
pub struct RunJson {
    pub json: String,
    pub version: u64,
}

impl RunJson {
    pub fn of(view: &RunView) -> Self {
        RunJson { json: serde_json::to_string(view).expect("wire DTOs serialize to JSON"), version: view.version }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::RunId;
    use crate::domain::run::{Claim, StartRequest};

    fn run() -> Run {
        let spec = serde_json::from_value::<StartRequest>(serde_json::json!({"objective": "x"})).unwrap().validate();
        let owner = Ownership { owner_ref: "o".into(), tenant_ref: "t".into(), account_ref: "a".into() };
        Run::new(&RunId::parse("run_abcdefgh").unwrap(), "h".into(), owner, spec.unwrap(), &["f"], Utc::now())
    }

    fn keys(v: &serde_json::Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    #[test]
    fn the_run_keeps_exactly_the_documented_fields_and_flags() {
        let public = run().to_public();
        let mut want = vec![
            "schema",
            "run_id",
            "ownership",
            "objective",
            "objective_hash",
            "runtime_provider",
            "lifecycle_status",
            "completion_status",
            "terminal_authority_status",
            "version",
            "completion_contract",
            "constraints",
            "database_scope",
            "budget",
            "unresolved_requirements",
            "contradictions",
            "pending_questions",
            "evidence",
            "latest_result",
            "recommended_next_action",
            "created_at",
            "updated_at",
            "completed_at",
            "cancelled_at",
            "answer_authority",
            "assistant_answer",
            "terminal_eligible",
            "raw_content_included",
        ];
        want.sort();
        assert_eq!(keys(&public), want);
        assert_eq!(public["schema"], RUN_SCHEMA);
        assert_eq!(public["runtime_provider"], "helix_ask");
        assert_eq!(public["budget"]["steps_remaining"], 12);
        assert_eq!(public["latest_result"], serde_json::Value::Null);
        assert_eq!(public["recommended_next_action"], "continue");
    }

    #[test]
    fn a_live_claim_is_observed_as_running_pending_wait() {
        let mut r = run();
        r.claim = Some(Claim { token: "c".into(), lease_until: 100, key_ref: "k".into() });
        let observed = |now| serde_json::from_str::<serde_json::Value>(&r.observed_json(now).json).unwrap();
        let live = observed(99);
        assert_eq!(
            (live["lifecycle_status"].as_str(), live["completion_status"].as_str()),
            (Some("running"), Some("pending"))
        );
        assert_eq!(live["recommended_next_action"], "wait");
        assert_eq!(observed(100)["recommended_next_action"], "continue", "an expired claim is not a live turn");
    }

    #[test]
    fn events_pages_and_mcp_errors_carry_the_four_false_flags() {
        let mut log = crate::domain::event::EventLog::after("run_abcdefgh", 0, Utc::now());
        let started = crate::domain::event::RunStarted { database_scope: vec![], max_steps: 1 };
        log.push(1, crate::domain::event::EventData::RunStarted(started));
        let page = to_value(&EventPageView::new("run_abcdefgh", log.events, 0, false));
        let error = McpErrorView {
            envelope: ErrorEnvelope {
                schema: ErrorSchemaName,
                error: ErrorDetail { code: "not_found".into(), message: "m".into(), retryable: false, details: None },
                request_id: "r".into(),
            },
            flags: NotAnAnswer::default(),
        };
        let error = to_value(&error);
        assert!(error["error"].get("details").is_none(), "absent details are omitted");
        let bundle = to_value(&EvidenceBundleView::of(&run()));
        for v in [&page, &page["events"][0], &error, &bundle] {
            for flag in ["answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"] {
                assert_eq!(v[flag], false, "{flag} in {v}");
            }
        }
        assert_eq!(page["next_after_seq"], 1);
        assert_eq!(page["events"][0]["schema"], EVENT_SCHEMA);
    }

    #[test]
    fn an_events_page_serializes_byte_for_byte_as_before_typed_event_data() {
        let events: Vec<Event> =
            include_str!("event_fixtures.jsonl").lines().take(2).map(|l| serde_json::from_str(l).unwrap()).collect();
        let page = EventPageView::new("run_0123456789abcdef0123", events, 0, true);
        let before = r#"{"schema":"helix.agent_run.event_page.v1","run_id":"run_0123456789abcdef0123","events":[{"schema":"helix.agent_run.event.v1","run_id":"run_0123456789abcdef0123","seq":1,"kind":"run_started","version":1,"created_at":"2026-11-30T10:00:00.123456Z","data":{"database_scope":["research_library"],"max_steps":12},"answer_authority":false,"assistant_answer":false,"terminal_eligible":false,"raw_content_included":false},{"schema":"helix.agent_run.event.v1","run_id":"run_0123456789abcdef0123","seq":2,"kind":"run_recovered","version":2,"created_at":"2026-11-30T10:00:00.123456Z","data":{"reason":"expired_claim","step":2},"answer_authority":false,"assistant_answer":false,"terminal_eligible":false,"raw_content_included":false}],"next_after_seq":2,"has_more":true,"answer_authority":false,"assistant_answer":false,"terminal_eligible":false,"raw_content_included":false}"#;
        assert_eq!(serde_json::to_string(&page).unwrap(), before);
    }
}
