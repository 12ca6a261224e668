//! The MCP tool catalogs: static tables whose rows carry everything about a tool (name,
//! description, scopes, hints, input and output schemas, what its first read prefetches,
//! and its handler). A front serves one catalog, listed in full and in this order to every
//! caller whatever its scopes (visibility is not permission: handlers enforce scopes).
//! Adding a tool is one row here and one handler in `tools`. Depends on the schema
//! generator, the handlers and the wire DTOs; never on the transport.

use std::sync::{Arc, OnceLock};

use rmcp::model::{
    Implementation, JsonObject, MetaObject, ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use serde_json::{Value, json};

use super::apps::{self, AppView, RUN_VIEW};
use super::schema::{input_schema, output_schema_of};
use super::tools::{Handler, device_check, embodiment, rooms, runs, sources};
use crate::domain::embodiment::{SubjectList, SubjectSelection, WorkflowView};
use crate::domain::room::{ChatBindingReceipt, RevocationReceipt, RoomList, RoomView, RunBindingReceipt};
use crate::domain::scopes::{
    ENV_ACTIONS_READ, ENV_ACTIONS_WRITE, ROOM_SOURCES_MANAGE, ROOMS_MANAGE, ROOMS_READ, RUNS_READ, RUNS_WRITE,
};
use crate::domain::source::{DeviceCheckReport, SourceCreated, SourceList};
use crate::domain::wire::{EventPageView, EvidenceBundleView, McpErrorView, RunView};
use crate::http::Group;
use crate::service::runs::RunMutation;

#[derive(Debug, Clone, Copy)]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

/// The data keys a call's first read joins to the principal's BatchGetItem, so a tool on
/// one run costs the round trips docs/round-trips.md counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefetch {
    Nothing,
    /// The run named by the `run_id` argument.
    Run,
    /// The run, and this mutation's receipt under the `idempotency_key` argument.
    RunMutation(RunMutation),
}

/// One tool: what `tools/list` publishes and what `tools/call` runs.
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// The complete scope set the handler requires (all of them).
    pub scopes: &'static [&'static str],
    pub hints: Hints,
    pub input: fn() -> JsonObject,
    /// The published `outputSchema` ([`or_error`], or [`error_only`]).
    pub output: fn() -> JsonObject,
    pub prefetch: Prefetch,
    pub call: Handler,
    /// The MCP App view (`_meta.ui.resourceUri`) hosts render this tool's results in, for
    /// clients that declare the `io.modelcontextprotocol/ui` extension ([`super::apps`]).
    pub view: Option<&'static AppView>,
}

/// How a server describes itself (`initialize`, `server/discover`).
pub struct Server {
    pub name: &'static str,
    pub title: &'static str,
    pub instructions: &'static str,
}

/// One MCP server: where it is served, its route group (limits, metadata path) and the
/// catalog it publishes.
pub struct Front {
    pub path: &'static str,
    pub group: Group,
    pub catalog: &'static Catalog,
}

/// The tools one front serves, and its server description.
pub struct Catalog {
    pub rows: &'static [ToolSpec],
    pub server: Server,
    built: OnceLock<Built>,
}

struct Built {
    inputs: Vec<Value>,
    tools: Vec<Tool>,
    /// The same tools as published to a client that declared the MCP Apps extension.
    app_tools: Vec<Tool>,
    info: ServerConfig,
}

impl Catalog {
    pub const fn new(rows: &'static [ToolSpec], server: Server) -> Self {
        Catalog { rows, server, built: OnceLock::new() }
    }

    /// Schemas and the server description are built once per process, in row order (the
    /// SDK asks for the description on every request it serves).
    fn built(&'static self) -> &'static Built {
        self.built.get_or_init(|| {
            let (inputs, tools): (Vec<Value>, Vec<Tool>) = self.rows.iter().map(build).unzip();
            let app_tools = self.rows.iter().zip(&tools).map(|(spec, tool)| apps::with_view(spec.view, tool)).collect();
            let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
                .with_server_info(
                    Implementation::new(self.server.name, env!("CARGO_PKG_VERSION")).with_title(self.server.title),
                )
                .with_protocol_version(ProtocolVersion::V_2025_11_25)
                .with_instructions(self.server.instructions);
            Built { inputs, tools, app_tools, info }
        })
    }

    pub fn find(&'static self, name: &str) -> Option<&'static ToolSpec> {
        self.rows.iter().find(|t| t.name == name)
    }

    /// The whole catalog as SDK tool objects, in row order.
    pub fn tools(&'static self) -> Vec<Tool> {
        self.built().tools.clone()
    }

    /// The catalog as published to one request: with the rows' `_meta.ui` when the client
    /// declared the MCP Apps extension (and the catalog has a view), else exactly [`Self::tools`].
    pub fn tools_for(&'static self, apps: bool) -> Vec<Tool> {
        if apps && self.has_views() { self.built().app_tools.clone() } else { self.tools() }
    }

    /// The distinct MCP App views of the rows, in row order (what `resources/list` lists).
    pub fn views(&'static self) -> Vec<&'static AppView> {
        let mut views: Vec<&'static AppView> = Vec::new();
        for view in self.rows.iter().filter_map(|r| r.view) {
            if !views.iter().any(|v| v.uri == view.uri) {
                views.push(view);
            }
        }
        views
    }

    pub fn has_views(&'static self) -> bool {
        self.rows.iter().any(|r| r.view.is_some())
    }

    pub fn tool(&'static self, name: &str) -> Option<Tool> {
        self.rows.iter().position(|t| t.name == name).map(|i| self.built().tools[i].clone())
    }

    /// A tool's input schema as a `Value` (what the preflight validates arguments against).
    pub fn input_schema(&'static self, name: &str) -> Option<&'static Value> {
        self.rows.iter().position(|t| t.name == name).map(|i| &self.built().inputs[i])
    }

    pub fn info(&'static self) -> ServerConfig {
        self.built().info.clone()
    }
}

fn build(spec: &ToolSpec) -> (Value, Tool) {
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
        .with_raw_output_schema(Arc::new((spec.output)()))
        .with_annotations(annotations)
        .with_meta(meta);
    (Value::Object(input), tool)
}

/// The standard `securitySchemes` value of a tool (also copied into its `_meta`).
pub fn security_schemes(spec: &ToolSpec) -> Value {
    json!([{ "type": "oauth2", "scopes": spec.scopes }])
}

// ---------- output schemas ----------
//
// Generated from the wire DTOs, the same types that serialize the results, so a published
// schema cannot drift from the JSON served. A tool's outputSchema admits its success shape
// or the MCP error result: some SDK clients (the TypeScript SDK) validate
// `structuredContent` of `isError` results too. Objects stay open (no
// `additionalProperties: false`) so adding a field does not break clients.

/// The output schema of a tool that answers `T` or an error result.
pub fn or_error<T: schemars::JsonSchema>() -> JsonObject {
    let Value::Object(root) =
        json!({ "type": "object", "anyOf": [output_schema_of::<T>(), output_schema_of::<McpErrorView>()] })
    else {
        unreachable!()
    };
    root
}

/// The output schema of a tool that never succeeds (the disabled command request).
pub fn error_only() -> JsonObject {
    let Value::Object(root) = output_schema_of::<McpErrorView>() else { unreachable!() };
    root
}

// ---------- the tables ----------

const WRITE: &[&str] = &[RUNS_WRITE];
const READ: &[&str] = &[RUNS_READ];
const ROOM_READ: &[&str] = &[ROOMS_READ];
const ROOM_MANAGE: &[&str] = &[ROOMS_MANAGE];
const ROOM_BIND: &[&str] = &[ROOMS_MANAGE, RUNS_WRITE];
const ENV_WRITE: &[&str] = &[ROOMS_READ, ENV_ACTIONS_WRITE];
const ENV_READ: &[&str] = &[ROOMS_READ, ENV_ACTIONS_READ];
const READ_HINTS: Hints = Hints { read_only: true, destructive: false, idempotent: true, open_world: false };

const INSTRUCTIONS: &str = "Helix runs are durable, bounded specialist investigations. Loop: helix_run_start -> \
helix_run_continue (one solver turn per call, with the current version as request.expected_version) until \
recommended_next_action is \"stop\"; answer pending_questions when it is \"answer_questions\". Every mutation \
takes an explicit idempotency_key: reuse it only to retry the same request. Results are observations with \
answer_authority=false, never an answer by themselves.";

/// The catalog of `/mcp`.
pub static MCP: Catalog =
    Catalog::new(CATALOG, Server { name: "helix-agent-api", title: "Helix Agent API", instructions: INSTRUCTIONS });

/// The catalog of `/mcp/device-check`: one read-only tool, so a read-only plugin cannot
/// discover the run, room, source or command tools.
pub static DEVICE_CHECK: Catalog = Catalog::new(
    DEVICE_CHECK_ROWS,
    Server {
        name: "helix-device-check",
        title: "Helix environment device check",
        instructions: "One read-only tool: helix_environment_device_check.",
    },
);

/// The rows of `/mcp`, in the order `tools/list` publishes them.
pub static CATALOG: &[ToolSpec] = &[
    ToolSpec {
        name: "helix_run_start",
        title: "Start a Helix run",
        description: "Create a durable, bounded Helix specialist run for a research objective over admitted \
            logical data scopes. Does not execute a solver turn: call helix_run_continue with the returned \
            version to execute one. Results are observations, never answer authority.",
        scopes: WRITE,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<runs::StartArgs>,
        output: or_error::<RunView>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(runs::start),
        view: Some(&RUN_VIEW),
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
        input: input_schema::<runs::ContinueArgs>,
        output: or_error::<RunView>,
        prefetch: Prefetch::RunMutation(RunMutation::Continue),
        call: |c| c.run(runs::continue_run),
        view: Some(&RUN_VIEW),
    },
    ToolSpec {
        name: "helix_run_cancel",
        title: "Cancel a Helix run",
        description: "Durably and irreversibly cancel a nonterminal run at its current version. Events and \
            evidence are kept; the run cannot be continued afterwards.",
        scopes: WRITE,
        hints: Hints { read_only: false, destructive: true, idempotent: true, open_world: false },
        input: input_schema::<runs::CancelArgs>,
        output: or_error::<RunView>,
        prefetch: Prefetch::RunMutation(RunMutation::Cancel),
        call: |c| c.run(runs::cancel),
        view: None,
    },
    ToolSpec {
        name: "helix_run_inspect",
        title: "Inspect a Helix run",
        description: "Read the current owner-scoped snapshot of a run (helix.agent_run.v1): version, statuses, \
            budget, unresolved requirements, contradictions, pending questions, evidence refs, latest result.",
        scopes: READ,
        hints: READ_HINTS,
        input: input_schema::<runs::RunArgs>,
        output: or_error::<RunView>,
        prefetch: Prefetch::Run,
        call: |c| c.run(runs::inspect),
        view: Some(&RUN_VIEW),
    },
    ToolSpec {
        name: "helix_run_fetch_evidence",
        title: "Fetch a run's evidence",
        description: "Fetch the normalized evidence bundle of a run (helix.agent_run.evidence_bundle.v1): \
            observation, evidence and receipt refs, admitted evidence items, supported and contradicted \
            claims, and terminal-authority status.",
        scopes: READ,
        hints: READ_HINTS,
        input: input_schema::<runs::RunArgs>,
        output: or_error::<EvidenceBundleView>,
        prefetch: Prefetch::Run,
        call: |c| c.run(runs::evidence),
        view: Some(&RUN_VIEW),
    },
    ToolSpec {
        name: "helix_run_list_events",
        title: "List a run's events",
        description: "Page through a run's ordered audit events (helix.agent_run.event.v1). Pass after_seq = \
            the previous page's next_after_seq while has_more is true.",
        scopes: READ,
        hints: READ_HINTS,
        input: input_schema::<runs::ListEventsArgs>,
        output: or_error::<EventPageView>,
        prefetch: Prefetch::Run,
        call: |c| c.run(runs::events),
        view: Some(&RUN_VIEW),
    },
    ToolSpec {
        name: "helix_room_list",
        title: "List Shared Live Rooms",
        description: "List the Shared Live Rooms the linked account is a member of (helix.room_list.v1), \
            one page at a time: pass a page's next_cursor as cursor for the next page (null on the last page). \
            Refused with room_feature_locked while the account policy locks the room feature.",
        scopes: ROOM_READ,
        hints: READ_HINTS,
        input: input_schema::<rooms::ListArgs>,
        output: or_error::<RoomList>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(rooms::list),
        view: None,
    },
    ToolSpec {
        name: "helix_room_inspect",
        title: "Inspect a Shared Live Room",
        description: "Read one room the caller is a member of (helix.room.v1): name, status, the caller's \
            role and consent state. Another account's room is not_found.",
        scopes: ROOM_READ,
        hints: READ_HINTS,
        input: input_schema::<rooms::RoomArgs>,
        output: or_error::<RoomView>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(rooms::inspect),
        view: None,
    },
    ToolSpec {
        name: "helix_room_create",
        title: "Create a Shared Live Room",
        description: "Idempotently create a room owned by the caller (the owner is derived from the token, \
            never from arguments). Returns helix.room.v1.",
        scopes: ROOM_MANAGE,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<rooms::CreateRoomArgs>,
        output: or_error::<RoomView>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(rooms::create),
        view: None,
    },
    ToolSpec {
        name: "helix_room_bind_run",
        title: "Bind a run to a room",
        description: "Durably bind one of the caller's runs to one room (helix.room_run_binding.v1). A run has \
            at most one active room binding: an exact retry returns it, another room is run_already_bound \
            until the binding is withdrawn with helix_room_unbind_run.",
        scopes: ROOM_BIND,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<rooms::BindRunArgs>,
        output: or_error::<RunBindingReceipt>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(rooms::bind_run),
        view: None,
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
        input: input_schema::<rooms::ClaimChatArgs>,
        output: or_error::<ChatBindingReceipt>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(rooms::claim_chat),
        view: None,
    },
    ToolSpec {
        name: "helix_room_unbind_run",
        title: "Withdraw a run-room binding",
        description: "Withdraw one of the caller's run-room bindings by its opaque binding_ref. Permanent and \
            idempotent (revoked, then already_revoked); frees the run for a fresh binding. Available even \
            while the room feature is locked.",
        scopes: ROOM_BIND,
        hints: Hints { read_only: false, destructive: true, idempotent: true, open_world: false },
        input: input_schema::<rooms::BindingRefArgs>,
        output: or_error::<RevocationReceipt>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(rooms::unbind_run),
        view: None,
    },
    ToolSpec {
        name: "helix_room_unbind_chat",
        title: "Withdraw a claimed chat binding",
        description: "Withdraw one of the caller's claimed run-chat bindings by its opaque binding_ref. \
            Permanent and idempotent; available even while the room feature is locked.",
        scopes: ROOM_BIND,
        hints: Hints { read_only: false, destructive: true, idempotent: true, open_world: false },
        input: input_schema::<rooms::BindingRefArgs>,
        output: or_error::<RevocationReceipt>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(rooms::unbind_chat),
        view: None,
    },
    ToolSpec {
        name: "helix_room_command_request",
        title: "Request a room command (disabled)",
        description: "Room command execution is not enabled: this tool always answers \
            command_execution_not_enabled and executes nothing.",
        scopes: ROOM_MANAGE,
        hints: Hints { read_only: true, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<rooms::CommandArgs>,
        output: error_only,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(rooms::command),
        view: None,
    },
    ToolSpec {
        name: "helix_room_source_list",
        title: "List a room's sources",
        description: "List the read-only environment source bindings of a room the caller owns \
            (helix.room_source_list.v1): adapter profile, world, status, credential generation and manifest \
            admission. Never contains a credential.",
        scopes: &[ROOM_SOURCES_MANAGE],
        hints: READ_HINTS,
        input: input_schema::<sources::SourceListArgs>,
        output: or_error::<SourceList>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(sources::list),
        view: None,
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
        input: input_schema::<sources::SourceCreateArgs>,
        output: or_error::<SourceCreated>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(sources::create),
        view: None,
    },
    ToolSpec {
        name: "helix_environment_subject_list",
        title: "List environment subjects",
        description: "Your identity in this environment: for each environment binding of a room you are a member \
            of, the sanitized room-scoped subjects (subject_ref, display name, online, selected by you, held by \
            another member) and your own binding. Never an environment-native player id.",
        scopes: ROOM_READ,
        hints: READ_HINTS,
        input: input_schema::<embodiment::SubjectListArgs>,
        output: or_error::<SubjectList>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(embodiment::subject_list),
        view: None,
    },
    ToolSpec {
        name: "helix_environment_subject_select",
        title: "Select your environment subject",
        description: "Bind yourself (only) to one exact, fresh subject_ref of an environment binding and take its \
            control lease. A subject another member holds is subject_conflict; a subject_ref from an older \
            directory is subject_stale.",
        scopes: ENV_WRITE,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: false },
        input: input_schema::<embodiment::SubjectSelectArgs>,
        output: or_error::<SubjectSelection>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(embodiment::subject_select),
        view: None,
    },
    ToolSpec {
        name: "helix_minecraft_player_action",
        title: "Act as your Minecraft player",
        description: "Queue one typed action (move_to, look_at, stop, break_block, place_block, equip, craft, chat, \
            wait, or a sequence of 1-16 of them) for your selected subject. Returns a durable workflow at once \
            (helix.minecraft_workflow.v1) with its status and poll_after_ms: poll helix_minecraft_workflow_status; \
            this tool never waits for the work. No command, teleport or game-mode change exists.",
        scopes: ENV_WRITE,
        hints: Hints { read_only: false, destructive: true, idempotent: true, open_world: true },
        input: input_schema::<embodiment::PlayerActionArgs>,
        output: or_error::<WorkflowView>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(embodiment::player_action),
        view: None,
    },
    ToolSpec {
        name: "helix_minecraft_workflow_status",
        title: "Read a player-action workflow",
        description: "Read one workflow of yours (helix.minecraft_workflow.v1): status, step, budget used, last \
            observation time, whether late effects are possible, and when to poll again.",
        scopes: ENV_READ,
        hints: READ_HINTS,
        input: input_schema::<embodiment::WorkflowArgs>,
        output: or_error::<WorkflowView>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(embodiment::workflow_status),
        view: None,
    },
    ToolSpec {
        name: "helix_minecraft_workflow_control",
        title: "Control a player-action workflow",
        description: "resume a paused workflow (after every check passes again), cancel one (idempotent on \
            terminal states), or emergency_stop: by the room owner, every queued or running workflow of the room \
            stops within one connector poll; by a member, only the subject the member selected (their own player) \
            stops. New actions are refused until a person clears the stop in the browser.",
        scopes: ENV_WRITE,
        hints: Hints { read_only: false, destructive: true, idempotent: true, open_world: true },
        input: input_schema::<embodiment::ControlArgs>,
        output: or_error::<WorkflowView>,
        prefetch: Prefetch::Nothing,
        call: |c| c.run(embodiment::workflow_control),
        view: None,
    },
    DEVICE_CHECK_TOOL,
];

/// Device Check, one row in both catalogs: the last tool of `/mcp` and the only tool of
/// `/mcp/device-check` (the same handler, schemas and scopes).
const DEVICE_CHECK_TOOL: ToolSpec = ToolSpec {
    name: "helix_environment_device_check",
    title: "Environment device check",
    description: "Report the connection health of the environment sources of your rooms: for each room you belong to, \
         each source's adapter profile, whether its producer registered and was admitted, its producer epoch, \
         the age of its last observation and whether that is fresh or stale. One page of rooms at a time: \
         pass next_cursor as cursor for the next page (null on the last page). Never returns a credential, an \
         endpoint or a player id. Read-only; nothing is executed.",
    scopes: ROOM_READ,
    hints: READ_HINTS,
    input: input_schema::<device_check::DeviceCheckArgs>,
    output: or_error::<DeviceCheckReport>,
    prefetch: Prefetch::Nothing,
    call: |c| c.run(device_check::check),
    view: None,
};

const DEVICE_CHECK_ROWS: &[ToolSpec] = &[DEVICE_CHECK_TOOL];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::schema::unportable_forms;
    use crate::mcp::validate::unsupported_keywords;

    fn every_row() -> impl Iterator<Item = &'static ToolSpec> {
        MCP.rows.iter().chain(DEVICE_CHECK.rows)
    }

    fn catalog_of(spec: &ToolSpec) -> &'static Catalog {
        if MCP.rows.iter().any(|r| std::ptr::eq(r, spec)) { &MCP } else { &DEVICE_CHECK }
    }

    /// The one pinned list: the published catalogs change only on purpose (every other test
    /// derives its tool names from the rows).
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
                "helix_room_source_create",
                "helix_environment_subject_list",
                "helix_environment_subject_select",
                "helix_minecraft_player_action",
                "helix_minecraft_workflow_status",
                "helix_minecraft_workflow_control",
                "helix_environment_device_check"
            ]
        );
        assert_eq!(MCP.tools().iter().map(|t| t.name.to_string()).collect::<Vec<_>>(), names);
        let device_check: Vec<&str> = DEVICE_CHECK.rows.iter().map(|t| t.name).collect();
        assert_eq!(device_check, ["helix_environment_device_check"]);
        assert_eq!(names.last(), Some(&"helix_environment_device_check"), "/mcp publishes Device Check too");
        let (on_mcp, alone) = (MCP.tool("helix_environment_device_check").unwrap(), DEVICE_CHECK.tools().remove(0));
        assert_eq!(serde_json::to_value(on_mcp).unwrap(), serde_json::to_value(alone).unwrap(), "one row, one tool");
    }

    #[test]
    fn input_schemas_are_strict_objects_with_the_documented_arguments() {
        for spec in every_row() {
            let s = catalog_of(spec).input_schema(spec.name).unwrap();
            assert_eq!(s["type"], "object", "{}", spec.name);
            assert_eq!(s["additionalProperties"], false, "{}", spec.name);
            assert!(s.get("$schema").is_none() && s.get("$defs").is_none(), "{}: {s}", spec.name);
            assert!(!s.to_string().contains("$ref"), "{}: subschemas are inlined", spec.name);
        }
        let start = MCP.input_schema("helix_run_start").unwrap();
        assert_eq!(start["required"], json!(["idempotency_key", "request"]));
        assert_eq!(start["properties"]["request"]["additionalProperties"], false);
        let events = MCP.input_schema("helix_run_list_events").unwrap();
        assert_eq!(events["required"], json!(["run_id"]));
        assert!(events["properties"].get("after_seq").is_some() && events["properties"].get("limit").is_some());
    }

    /// Gemini's function declarations reject `type` arrays, `$ref`/`$defs` and boolean
    /// schemas; Copilot's hosts are as strict. Every published input schema avoids them.
    #[test]
    fn every_published_input_schema_avoids_forms_strict_clients_reject() {
        let found: Vec<String> = every_row()
            .flat_map(|spec| unportable_forms(catalog_of(spec).input_schema(spec.name).unwrap(), spec.name))
            .collect();
        assert!(found.is_empty(), "{} unportable forms:\n{}", found.len(), found.join("\n"));
    }

    #[test]
    fn every_published_schema_uses_only_keywords_the_validator_knows() {
        for spec in every_row() {
            let input = catalog_of(spec).input_schema(spec.name).unwrap();
            assert_eq!(unsupported_keywords(input), Vec::<String>::new(), "{} input", spec.name);
            let output = Value::Object((spec.output)());
            assert_eq!(unsupported_keywords(&output), Vec::<String>::new(), "{} output", spec.name);
        }
    }

    #[test]
    fn every_tool_declares_its_scopes_in_meta() {
        for (spec, tool) in every_row().zip(MCP.tools().into_iter().chain(DEVICE_CHECK.tools())) {
            let meta = tool.meta.expect("_meta");
            assert_eq!(meta.get("securitySchemes"), Some(&security_schemes(spec)));
            assert!(tool.output_schema.is_some() && tool.annotations.is_some());
        }
    }

    /// docs/wire.md ("MCP tools") lists every tool of both catalogs, in order, with its
    /// scopes: a tool added to a catalog is documented, and a documented scope is the one
    /// the tool publishes.
    #[test]
    fn docs_wire_md_lists_every_tool_of_both_catalogs_with_its_scopes() {
        let doc = include_str!("../../../docs/wire.md");
        let section = doc.split("\n## MCP tools\n").nth(1).expect("docs/wire.md has an \"## MCP tools\" section");
        let section = section.split("\n## ").next().unwrap();
        let ticked = |cell: &str| -> Vec<String> {
            cell.split(',').map(|s| s.trim().trim_matches('`').to_owned()).filter(|s| !s.is_empty()).collect()
        };
        let documented: Vec<(String, Vec<String>)> = section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1].trim_matches('`').to_owned(), ticked(cells[2]))
            })
            .collect();
        let published: Vec<(String, Vec<String>)> =
            MCP.rows.iter().map(|t| (t.name.to_owned(), t.scopes.iter().map(|s| s.to_string()).collect())).collect();
        assert_eq!(documented, published, "docs/wire.md \"MCP tools\" and the catalogs differ");
    }
}
