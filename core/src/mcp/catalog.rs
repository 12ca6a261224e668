//! The MCP tool catalog: one static table, listed in full and in this order to every
//! caller whatever its scopes (visibility is not permission: handlers enforce scopes).
//! Room tools are appended as further rows and `Op` variants.

use std::sync::{Arc, LazyLock};

use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::rooms::{BindRunArgs, BindingRefArgs, ClaimChatArgs, CommandArgs, CreateRoomArgs, NoArgs, RoomArgs, RoomOp};
use super::schema::{input_schema, output_schema_of};
use crate::domain::room::{ChatBindingReceipt, RevocationReceipt, RoomList, RoomView, RunBindingReceipt};
use crate::domain::run::{CancelRequest, ContinueRequest, StartRequest};
use crate::domain::scopes::{ROOM_SOURCES_MANAGE, ROOMS_MANAGE, ROOMS_READ, RUNS_READ, RUNS_WRITE};
use crate::domain::source::{CreateSourceRequest, SourceCreated, SourceList};
use crate::domain::wire::{EventPageView, EvidenceBundleView, McpErrorView, RunView};

/// What a tool does; `server` dispatches on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    RunStart,
    RunContinue,
    RunCancel,
    RunInspect,
    RunEvidence,
    RunEvents,
    Room(RoomOp),
    SourceList,
    SourceCreate,
}

/// The shape of a tool's successful `structuredContent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Run,
    EvidenceBundle,
    EventPage,
    Room,
    RoomList,
    RunBinding,
    ChatBinding,
    Revocation,
    /// The tool never succeeds (the disabled command request): its schema is the error's.
    RefusalOnly,
    SourceList,
    SourceCreated,
}

#[derive(Debug, Clone, Copy)]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// The complete scope set the handler requires (all of them).
    pub scopes: &'static [&'static str],
    pub hints: Hints,
    pub input: fn() -> JsonObject,
    pub output: Output,
    pub op: Op,
}

// ---------- arguments (strict: unknown keys are refused at every level) ----------

/// Arguments of helix_run_start.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// Caller-chosen key of 8-200 visible ASCII characters, fresh for each distinct start. The same key with the same request replays the stored result; with a different request it is idempotency_conflict.
    pub idempotency_key: String,
    /// The start request (the body of POST /api/v1/agent-runs).
    pub request: StartRequest,
}

/// Arguments of helix_run_continue.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueArgs {
    /// The run to continue (run_...), as returned by helix_run_start.
    pub run_id: String,
    /// Caller-chosen key of 8-200 visible ASCII characters, fresh for each turn. A retry with the same key and request replays the stored result.
    pub idempotency_key: String,
    /// The continue request: the run's current version as expected_version, plus an instruction, answers to pending_questions, or both.
    pub request: ContinueRequest,
}

/// Arguments of helix_run_cancel.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelArgs {
    /// The run to cancel (run_...).
    pub run_id: String,
    /// Caller-chosen key of 8-200 visible ASCII characters. A retry with the same key and request replays the stored result.
    pub idempotency_key: String,
    /// The cancel request: the run's current version as expected_version, and an optional reason.
    pub request: CancelRequest,
}

/// Arguments of the run read tools.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The run (run_...).
    pub run_id: String,
}

/// Arguments of helix_run_list_events.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListEventsArgs {
    /// The run (run_...).
    pub run_id: String,
    /// Return events with seq greater than this (default 0: from the first event).
    #[serde(default)]
    pub after_seq: Option<u64>,
    /// Page size, 1-200 (default 50).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Arguments of helix_room_source_list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceListArgs {
    /// A room the caller owns (room_...).
    pub room_id: String,
}

/// Arguments of helix_room_source_create.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceCreateArgs {
    /// A room the caller owns (room_...).
    pub room_id: String,
    /// Caller-chosen key of 8-200 visible ASCII characters. A retry with the same key and request replays the stored result (without the claim handle, which is shown once).
    pub idempotency_key: String,
    /// The source request (the body of POST /api/v1/rooms/{room_id}/sources).
    pub request: CreateSourceRequest,
}

// ---------- the table ----------

const WRITE: &[&str] = &[RUNS_WRITE];
const READ: &[&str] = &[RUNS_READ];
const ROOM_READ: &[&str] = &[ROOMS_READ];
const ROOM_MANAGE: &[&str] = &[ROOMS_MANAGE];
const ROOM_BIND: &[&str] = &[ROOMS_MANAGE, RUNS_WRITE];
const READ_HINTS: Hints = Hints { read_only: true, destructive: false, idempotent: true, open_world: false };

pub static CATALOG: &[ToolSpec] = &[
    ToolSpec {
        name: "helix_run_start",
        title: "Start a Helix run",
        description: "Create a durable, bounded Helix specialist run for a research objective over admitted \
            logical data scopes. Does not execute a solver turn: call helix_run_continue with the returned \
            version to execute one. Results are observations, never answer authority.",
        scopes: WRITE,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<StartArgs>,
        output: Output::Run,
        op: Op::RunStart,
    },
    ToolSpec {
        name: "helix_run_continue",
        title: "Continue a Helix run",
        description: "Execute and persist exactly one governed Helix Ask solver turn on a run. Pass the run's \
            current version as request.expected_version, and an instruction, answers to pending_questions, \
            or both. Stop when recommended_next_action is \"stop\"; answer pending questions when it is \
            \"answer_questions\".",
        scopes: WRITE,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: true },
        input: input_schema::<ContinueArgs>,
        output: Output::Run,
        op: Op::RunContinue,
    },
    ToolSpec {
        name: "helix_run_cancel",
        title: "Cancel a Helix run",
        description: "Durably and irreversibly cancel a nonterminal run at its current version. Events and \
            evidence are kept; the run cannot be continued afterwards.",
        scopes: WRITE,
        hints: Hints { read_only: false, destructive: true, idempotent: true, open_world: false },
        input: input_schema::<CancelArgs>,
        output: Output::Run,
        op: Op::RunCancel,
    },
    ToolSpec {
        name: "helix_run_inspect",
        title: "Inspect a Helix run",
        description: "Read the current owner-scoped snapshot of a run (helix.agent_run.v1): version, statuses, \
            budget, unresolved requirements, contradictions, pending questions, evidence refs, latest result.",
        scopes: READ,
        hints: READ_HINTS,
        input: input_schema::<RunArgs>,
        output: Output::Run,
        op: Op::RunInspect,
    },
    ToolSpec {
        name: "helix_run_fetch_evidence",
        title: "Fetch a run's evidence",
        description: "Fetch the normalized evidence bundle of a run (helix.agent_run.evidence_bundle.v1): \
            observation, evidence and receipt refs, admitted evidence items, supported and contradicted \
            claims, and terminal-authority status.",
        scopes: READ,
        hints: READ_HINTS,
        input: input_schema::<RunArgs>,
        output: Output::EvidenceBundle,
        op: Op::RunEvidence,
    },
    ToolSpec {
        name: "helix_run_list_events",
        title: "List a run's events",
        description: "Page through a run's ordered audit events (helix.agent_run.event.v1). Pass after_seq = \
            the previous page's next_after_seq while has_more is true.",
        scopes: READ,
        hints: READ_HINTS,
        input: input_schema::<ListEventsArgs>,
        output: Output::EventPage,
        op: Op::RunEvents,
    },
    ToolSpec {
        name: "helix_room_list",
        title: "List Shared Live Rooms",
        description: "List the Shared Live Rooms the linked account is a member of (helix.room_list.v1). \
            Refused with room_feature_locked while the account policy locks the room feature.",
        scopes: ROOM_READ,
        hints: READ_HINTS,
        input: input_schema::<NoArgs>,
        output: Output::RoomList,
        op: Op::Room(RoomOp::List),
    },
    ToolSpec {
        name: "helix_room_inspect",
        title: "Inspect a Shared Live Room",
        description: "Read one room the caller is a member of (helix.room.v1): name, status, the caller's \
            role and consent state. Another account's room is not_found.",
        scopes: ROOM_READ,
        hints: READ_HINTS,
        input: input_schema::<RoomArgs>,
        output: Output::Room,
        op: Op::Room(RoomOp::Inspect),
    },
    ToolSpec {
        name: "helix_room_create",
        title: "Create a Shared Live Room",
        description: "Idempotently create a room owned by the caller (the owner is derived from the token, \
            never from arguments). Returns helix.room.v1.",
        scopes: ROOM_MANAGE,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<CreateRoomArgs>,
        output: Output::Room,
        op: Op::Room(RoomOp::Create),
    },
    ToolSpec {
        name: "helix_room_bind_run",
        title: "Bind a run to a room",
        description: "Durably bind one of the caller's runs to one room (helix.room_run_binding.v1). A run has \
            at most one active room binding: an exact retry returns it, another room is run_already_bound \
            until the binding is withdrawn with helix_room_unbind_run.",
        scopes: ROOM_BIND,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<BindRunArgs>,
        output: Output::RunBinding,
        op: Op::Room(RoomOp::BindRun),
    },
    ToolSpec {
        name: "helix_room_claim_chat_binding",
        title: "Claim a browser chat for a run",
        description: "Consume the one-time chat claim handle a signed-in browser issued (hcc_...) for the \
            caller's own run: the run's progress and its one verified terminal answer then reach that \
            chat. The receipt (helix.room_chat_binding.v1) never carries the chat id. A reused, expired or \
            foreign handle is claim_handle_invalid.",
        scopes: ROOM_BIND,
        hints: Hints { read_only: false, destructive: false, idempotent: false, open_world: false },
        input: input_schema::<ClaimChatArgs>,
        output: Output::ChatBinding,
        op: Op::Room(RoomOp::ClaimChat),
    },
    ToolSpec {
        name: "helix_room_unbind_run",
        title: "Withdraw a run-room binding",
        description: "Withdraw one of the caller's run-room bindings by its opaque binding_ref. Permanent and \
            idempotent (revoked, then already_revoked); frees the run for a fresh binding. Available even \
            while the room feature is locked.",
        scopes: ROOM_BIND,
        hints: Hints { read_only: false, destructive: true, idempotent: true, open_world: false },
        input: input_schema::<BindingRefArgs>,
        output: Output::Revocation,
        op: Op::Room(RoomOp::UnbindRun),
    },
    ToolSpec {
        name: "helix_room_unbind_chat",
        title: "Withdraw a claimed chat binding",
        description: "Withdraw one of the caller's claimed run-chat bindings by its opaque binding_ref. \
            Permanent and idempotent; available even while the room feature is locked.",
        scopes: ROOM_BIND,
        hints: Hints { read_only: false, destructive: true, idempotent: true, open_world: false },
        input: input_schema::<BindingRefArgs>,
        output: Output::Revocation,
        op: Op::Room(RoomOp::UnbindChat),
    },
    ToolSpec {
        name: "helix_room_command_request",
        title: "Request a room command (disabled)",
        description: "Room command execution is not enabled: this tool always answers \
            command_execution_not_enabled and executes nothing.",
        scopes: ROOM_MANAGE,
        hints: Hints { read_only: true, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<CommandArgs>,
        output: Output::RefusalOnly,
        op: Op::Room(RoomOp::Command),
    },
    ToolSpec {
        name: "helix_room_source_list",
        title: "List a room's sources",
        description: "List the read-only environment source bindings of a room the caller owns \
            (helix.room_source_list.v1): adapter profile, world, status, credential generation and manifest \
            admission. Never contains a credential.",
        scopes: &[ROOM_SOURCES_MANAGE],
        hints: READ_HINTS,
        input: input_schema::<SourceListArgs>,
        output: Output::SourceList,
        op: Op::SourceList,
    },
    ToolSpec {
        name: "helix_room_source_create",
        title: "Create a room source",
        description: "Idempotently create a read-only environment source (adapter profile minecraft or fixture, \
            one world) in a room the caller owns. Returns the source and a credential_delivery with only an \
            opaque claim handle, claim URL and expiry: the room owner claims the source bearer in the signed-in \
            browser at claim_url. The bearer and plugin configuration are never in this result.",
        scopes: &[ROOM_SOURCES_MANAGE],
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<SourceCreateArgs>,
        output: Output::SourceCreated,
        op: Op::SourceCreate,
    },
];

pub fn find(name: &str) -> Option<&'static ToolSpec> {
    CATALOG.iter().find(|t| t.name == name)
}

/// The standard `securitySchemes` value of a tool (also copied into its `_meta`).
pub fn security_schemes(spec: &ToolSpec) -> Value {
    json!([{ "type": "oauth2", "scopes": spec.scopes }])
}

struct Built {
    input: Value,
    tool: Tool,
}

/// Schemas are generated once per process, in catalog order.
static BUILT: LazyLock<Vec<Built>> = LazyLock::new(|| CATALOG.iter().map(build).collect());

fn build(spec: &ToolSpec) -> Built {
    let input = (spec.input)();
    let annotations = ToolAnnotations::with_title(spec.title)
        .read_only(spec.hints.read_only)
        .destructive(spec.hints.destructive)
        .idempotent(spec.hints.idempotent)
        .open_world(spec.hints.open_world);
    let mut meta = MetaObject::new();
    meta.insert("securitySchemes".into(), security_schemes(spec));
    let tool = Tool::new(spec.name, spec.description, Arc::new(input.clone()))
        .with_title(spec.title)
        .with_raw_output_schema(Arc::new(output_schema(spec.output)))
        .with_annotations(annotations)
        .with_meta(meta);
    Built { input: Value::Object(input), tool }
}

/// The whole catalog as SDK tool objects, in catalog order.
pub fn tools() -> Vec<Tool> {
    BUILT.iter().map(|b| b.tool.clone()).collect()
}

pub fn tool(name: &str) -> Option<Tool> {
    CATALOG.iter().position(|t| t.name == name).map(|i| BUILT[i].tool.clone())
}

/// A tool's input schema as a `Value` (what the preflight validates arguments against).
pub fn input_schema_value(spec: &ToolSpec) -> &'static Value {
    let i = CATALOG.iter().position(|t| std::ptr::eq(t, spec)).expect("a catalog row");
    &BUILT[i].input
}

// ---------- output schemas ----------
//
// Generated from the wire DTOs in `domain::wire`, the same types that serialize the
// results, so a published schema cannot drift from the JSON served. A tool's
// outputSchema admits its success shape or the MCP error result: some SDK clients
// (the TypeScript SDK) validate `structuredContent` of `isError` results too. Objects
// stay open (no `additionalProperties: false`) so adding a field does not break clients.

fn output_schema(output: Output) -> JsonObject {
    let success = match output {
        Output::Run => output_schema_of::<RunView>(),
        Output::EvidenceBundle => output_schema_of::<EvidenceBundleView>(),
        Output::EventPage => output_schema_of::<EventPageView>(),
        Output::Room => output_schema_of::<RoomView>(),
        Output::RoomList => output_schema_of::<RoomList>(),
        Output::RunBinding => output_schema_of::<RunBindingReceipt>(),
        Output::ChatBinding => output_schema_of::<ChatBindingReceipt>(),
        Output::Revocation => output_schema_of::<RevocationReceipt>(),
        Output::RefusalOnly => {
            let Value::Object(root) = output_schema_of::<McpErrorView>() else { unreachable!() };
            return root;
        }
        Output::SourceList => output_schema_of::<SourceList>(),
        Output::SourceCreated => output_schema_of::<SourceCreated>(),
    };
    let Value::Object(root) = json!({ "type": "object", "anyOf": [success, output_schema_of::<McpErrorView>()] })
    else {
        unreachable!()
    };
    root
}

/// The published output schema of a tool, by name (tests validate results against it).
pub fn output_schema_value(name: &str) -> Option<Value> {
    find(name).map(|spec| Value::Object(output_schema(spec.output)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::schema::unsupported_keywords;

    #[test]
    fn catalog_names_are_unique_and_in_a_stable_order() {
        let names: Vec<&str> = CATALOG.iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            [
                "helix_run_start",
                "helix_run_continue",
                "helix_run_cancel",
                "helix_run_inspect",
                "helix_run_fetch_evidence",
                "helix_run_list_events",
                "helix_room_list",
                "helix_room_inspect",
                "helix_room_create",
                "helix_room_bind_run",
                "helix_room_claim_chat_binding",
                "helix_room_unbind_run",
                "helix_room_unbind_chat",
                "helix_room_command_request",
                "helix_room_source_list",
                "helix_room_source_create"
            ]
        );
        assert_eq!(tools().iter().map(|t| t.name.to_string()).collect::<Vec<_>>(), names);
    }

    #[test]
    fn input_schemas_are_strict_objects_with_the_documented_arguments() {
        for spec in CATALOG {
            let s = input_schema_value(spec);
            assert_eq!(s["type"], "object", "{}", spec.name);
            assert_eq!(s["additionalProperties"], false, "{}", spec.name);
            assert!(s.get("$schema").is_none() && s.get("$defs").is_none(), "{}: {s}", spec.name);
            assert!(!s.to_string().contains("$ref"), "{}: subschemas are inlined", spec.name);
        }
        let start = input_schema_value(find("helix_run_start").unwrap());
        assert_eq!(start["required"], json!(["idempotency_key", "request"]));
        assert_eq!(start["properties"]["request"]["additionalProperties"], false);
        let events = input_schema_value(find("helix_run_list_events").unwrap());
        assert_eq!(events["required"], json!(["run_id"]));
        assert!(events["properties"].get("after_seq").is_some() && events["properties"].get("limit").is_some());
    }

    #[test]
    fn every_published_schema_uses_only_keywords_the_validator_knows() {
        for spec in CATALOG {
            let input = input_schema_value(spec);
            assert_eq!(unsupported_keywords(input), Vec::<String>::new(), "{} input", spec.name);
            let output = Value::Object(output_schema(spec.output));
            assert_eq!(unsupported_keywords(&output), Vec::<String>::new(), "{} output", spec.name);
        }
    }

    #[test]
    fn every_tool_declares_its_scopes_in_meta() {
        for (spec, tool) in CATALOG.iter().zip(tools()) {
            let meta = tool.meta.expect("_meta");
            assert_eq!(meta.get("securitySchemes"), Some(&security_schemes(spec)));
            assert!(tool.output_schema.is_some() && tool.annotations.is_some());
        }
    }
}
