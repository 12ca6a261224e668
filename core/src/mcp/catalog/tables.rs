//! The rows of the catalogs: one [`ToolSpec`] per tool, in `tools/list` order. Adding a
//! tool is one row here and one handler in `crate::mcp::tools`.

use super::*;
use crate::domain::schema::input_schema;
use crate::domain::scopes::{
    ENV_ACTIONS_READ, ENV_ACTIONS_WRITE, ROOM_SOURCES_MANAGE, ROOMS_MANAGE, ROOMS_READ, RUNS_READ, RUNS_WRITE,
};
use crate::mcp::tools::{device_check, embodiment, rooms, runs, sources};

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
        io: tool_io!(runs::start),
        prefetch: Prefetch::Nothing,
        view: Some(&RUN_VIEW),
    },
    ToolSpec {
        name: "helix_run_continue",
        title: "Continue a Helix run",
        description: "Execute and persist exactly one governed Helix Ask solver turn on a run. Pass the run's \
            current version as request.expected_version, and an instruction, answers to pending_questions, \
            or both. Stop when recommended_next_action is \"stop\"; answer pending questions when it is \
            \"answer_questions\". A request that declares the MCP Tasks extension (io.modelcontextprotocol/tasks) \
            may be answered with a task instead: poll tasks/get with its taskId (a name valid for this caller \
            only, kept 24 hours from the call, as long as the idempotency key's receipt); its result is this \
            tool's result. tasks/cancel cancels the run at its current version.",
        scopes: WRITE,
        hints: Hints { read_only: false, destructive: false, idempotent: true, open_world: true },
        input: input_schema::<runs::ContinueArgs>,
        io: tool_io!(runs::continue_run),
        prefetch: Prefetch::RunMutation(RunMutation::Continue),
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
        io: tool_io!(runs::cancel),
        prefetch: Prefetch::RunMutation(RunMutation::Cancel),
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
        io: tool_io!(runs::inspect),
        prefetch: Prefetch::Run,
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
        io: tool_io!(runs::evidence),
        prefetch: Prefetch::Run,
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
        io: tool_io!(runs::events),
        prefetch: Prefetch::Run,
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
        io: tool_io!(rooms::list),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(rooms::inspect),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(rooms::create),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(rooms::bind_run),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(rooms::claim_chat),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(rooms::unbind_run),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(rooms::unbind_chat),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(rooms::command),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(sources::list),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(sources::create),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(embodiment::subject_list),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(embodiment::subject_select),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(embodiment::player_action),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(embodiment::workflow_status),
        prefetch: Prefetch::Nothing,
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
        io: tool_io!(embodiment::workflow_control),
        prefetch: Prefetch::Nothing,
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
    io: tool_io!(device_check::check),
    prefetch: Prefetch::Nothing,
    view: None,
};

const DEVICE_CHECK_ROWS: &[ToolSpec] = &[DEVICE_CHECK_TOOL];
