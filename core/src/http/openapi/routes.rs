//! The route table of the published REST contract: every JSON route of the bearer lanes
//! (agent runs, rooms, room sources, producer ingress) and of the cookie lane, with its
//! scopes and the Rust types its handler reads and answers. A unit test compares it with
//! the routes the routers register.

use schemars::JsonSchema;
use serde_json::Value;

use crate::domain::embodiment::protocol::{PollRequest, PollResponse, RegisterReceipt, RegisterRequest};
use crate::domain::embodiment::{
    PairingCreated, PairingRequest, StopCleared, SubjectList, SubjectSelection, WorkflowView,
};
use crate::domain::ids::RunId;
use crate::domain::page::PageQuery;
use crate::domain::room::{ChatBindingReceipt, RevocationReceipt, RoomList, RoomView, RunBindingReceipt};
use crate::domain::room::{ChatClaimRequest, CreateRoomRequest, RunBindingRequest};
use crate::domain::room::{ObserverCreated, ObserverDisconnect, ObserverEventPage, ObserverRequest, ObserverView};
use crate::domain::run::{CancelRequest, ContinueRequest, EventQuery, RunListParams, StartRequest};
use crate::domain::scopes::{ENV_ACTIONS_READ, ENV_ACTIONS_WRITE};
use crate::domain::scopes::{ROOM_SOURCES_MANAGE, ROOMS_MANAGE, ROOMS_READ, RUNS_READ, RUNS_WRITE};
use crate::domain::source::{
    CreateSourceRequest, CredentialClaimRequest, Manifest, ManifestReceipt, ObservationBatch, ObservationReceipt,
    ProbeAnswer, ProbeAnswerReceipt, ProbeList, SourceCreated, SourceCredential, SourceList, SourceRef,
    SourceRevocation,
};
use crate::domain::wire::{EventPageView, EvidenceBundleView, RunListView, RunView};
use crate::http::agent::player_actions::{ActionBody, ControlBody, SelectBody};
use crate::service::accounts::{BindingList, Revocation};
use crate::service::embodiment::{ClearStopRequest, PairingRevoked, PairingRoom, RegionRequest, RegionSet};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// An OAuth access token holding every one of these scopes.
    Bearer(&'static [&'static str]),
    /// A room source's own credential (producer ingress).
    SourceCredential,
    /// An action connector's own credential (the southbound connector routes).
    ConnectorCredential,
    /// The browser session cookie, with a same-origin proof on writes.
    Cookie,
}

/// A Rust type's name and JSON Schema, as generated (a function pointer, so the table
/// is const). Each named schema lands once in `components/schemas`.
pub type SchemaFn = fn() -> (String, Value);

/// A request body: the MCP input-schema form (inlined, portable, unknown fields refused).
pub fn request<T: JsonSchema>() -> (String, Value) {
    (T::schema_name().into_owned(), Value::Object(crate::domain::schema::input_schema::<T>()))
}

/// A response body: the MCP output-schema form (the serialize contract), made portable.
pub fn response<T: JsonSchema>() -> (String, Value) {
    let mut v = crate::domain::schema::output_schema_of::<T>();
    crate::domain::schema::portable(&mut v);
    (T::schema_name().into_owned(), v)
}

/// A path parameter's schema: the type that parses it (the handler answers `not_found`
/// for anything else). `binding_ref` names a run or a chat binding by its route.
pub fn path_param(path: &str, name: &str) -> Value {
    use crate::domain::embodiment::{EnvBindingId, WorkflowRef};
    use crate::domain::room::{ChatBindingRef, ObserverRef, RoomId, RunBindingRef};
    let schema: SchemaFn = match name {
        "run_id" => response::<RunId>,
        "room_id" => response::<RoomId>,
        "binding_ref" if path.contains("/run-bindings/") => response::<RunBindingRef>,
        "binding_ref" if path.contains("/chat-bindings/") => response::<ChatBindingRef>,
        "workflow_ref" => response::<WorkflowRef>,
        "environment_binding_id" => response::<EnvBindingId>,
        "observer_ref" => response::<ObserverRef>,
        "probe_id" => response::<crate::domain::source::ProbeIdParam>,
        _ => return serde_json::json!({"type": "string"}),
    };
    schema().1
}

/// One operation.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    pub lane: Lane,
    /// The query's type: each of its properties is an optional query parameter.
    pub query: Option<SchemaFn>,
    /// POST routes of the bearer lanes take an `Idempotency-Key` header.
    pub idempotency_key: bool,
    pub request: Option<SchemaFn>,
    /// Success status and the schema of its body.
    pub ok: &'static [(u16, SchemaFn)],
}

const CURSOR: Option<SchemaFn> = Some(request::<PageQuery>);
const RUN_LIST: Option<SchemaFn> = Some(request::<RunListParams>);
const EVENTS: Option<SchemaFn> = Some(request::<EventQuery>);
const RUNS_R: Lane = Lane::Bearer(&[RUNS_READ]);
const RUNS_W: Lane = Lane::Bearer(&[RUNS_WRITE]);
const BIND: Lane = Lane::Bearer(&[ROOMS_MANAGE, RUNS_WRITE]);
const ACT_R: Lane = Lane::Bearer(&[ROOMS_READ, ENV_ACTIONS_READ]);
const ACT_W: Lane = Lane::Bearer(&[ROOMS_READ, ENV_ACTIONS_WRITE]);

const fn op(
    method: &'static str,
    path: &'static str,
    operation_id: &'static str,
    summary: &'static str,
    lane: Lane,
) -> Route {
    Route { method, path, operation_id, summary, lane, query: None, idempotency_key: false, request: None, ok: &[] }
}

pub const ROUTES: &[Route] = &[
    // Agent runs.
    Route {
        query: RUN_LIST,
        ok: &[(200, response::<RunListView>)],
        ..op("get", "/api/v1/agent-runs", "listAgentRuns", "The caller's own runs, newest first", RUNS_R)
    },
    Route {
        idempotency_key: true,
        request: Some(request::<StartRequest>),
        ok: &[(201, response::<RunView>), (200, response::<RunView>)],
        ..op("post", "/api/v1/agent-runs", "startAgentRun", "Start a run", RUNS_W)
    },
    Route {
        ok: &[(200, response::<RunView>)],
        ..op("get", "/api/v1/agent-runs/{run_id}", "inspectAgentRun", "Inspect a run", RUNS_R)
    },
    Route {
        idempotency_key: true,
        request: Some(request::<ContinueRequest>),
        ok: &[(200, response::<RunView>)],
        ..op("post", "/api/v1/agent-runs/{run_id}/continue", "continueAgentRun", "Run a bounded turn", RUNS_W)
    },
    Route {
        idempotency_key: true,
        request: Some(request::<CancelRequest>),
        ok: &[(200, response::<RunView>)],
        ..op("post", "/api/v1/agent-runs/{run_id}/cancel", "cancelAgentRun", "Cancel a run", RUNS_W)
    },
    Route {
        query: EVENTS,
        ok: &[(200, response::<EventPageView>)],
        ..op("get", "/api/v1/agent-runs/{run_id}/events", "listAgentRunEvents", "A page of the run's events", RUNS_R)
    },
    Route {
        ok: &[(200, response::<EvidenceBundleView>)],
        ..op(
            "get",
            "/api/v1/agent-runs/{run_id}/evidence",
            "fetchAgentRunEvidence",
            "The run's evidence bundle",
            RUNS_R,
        )
    },
    // Rooms.
    Route {
        query: CURSOR,
        ok: &[(200, response::<RoomList>)],
        ..op("get", "/api/v1/rooms", "listRooms", "The caller's rooms", Lane::Bearer(&[ROOMS_READ]))
    },
    Route {
        idempotency_key: true,
        request: Some(request::<CreateRoomRequest>),
        ok: &[(201, response::<RoomView>), (200, response::<RoomView>)],
        ..op("post", "/api/v1/rooms", "createRoom", "Create a room", Lane::Bearer(&[ROOMS_MANAGE]))
    },
    Route {
        request: Some(request::<RunBindingRequest>),
        ok: &[(201, response::<RunBindingReceipt>), (200, response::<RunBindingReceipt>)],
        ..op("post", "/api/v1/rooms/run-bindings", "bindRunToRoom", "Bind a run to a room", BIND)
    },
    Route {
        ok: &[(200, response::<RevocationReceipt>)],
        ..op("delete", "/api/v1/rooms/run-bindings/{binding_ref}", "unbindRun", "Withdraw a run binding", BIND)
    },
    Route {
        request: Some(request::<ChatClaimRequest>),
        ok: &[(201, response::<ChatBindingReceipt>), (200, response::<ChatBindingReceipt>)],
        ..op("post", "/api/v1/rooms/chat-bindings/claim", "claimChatBinding", "Claim a chat binding", BIND)
    },
    Route {
        ok: &[(200, response::<RevocationReceipt>)],
        ..op("delete", "/api/v1/rooms/chat-bindings/{binding_ref}", "unbindChat", "Withdraw a chat binding", BIND)
    },
    Route {
        ok: &[(200, response::<RoomView>)],
        ..op("get", "/api/v1/rooms/{room_id}", "inspectRoom", "Inspect a room", Lane::Bearer(&[ROOMS_READ]))
    },
    Route {
        ..op(
            "post",
            "/api/v1/rooms/{room_id}/commands",
            "roomCommand",
            "Room commands (not enabled: always an error)",
            Lane::Bearer(&[ROOMS_MANAGE]),
        )
    },
    // Room sources.
    Route {
        query: CURSOR,
        ok: &[(200, response::<SourceList>)],
        ..op(
            "get",
            "/api/v1/rooms/{room_id}/sources",
            "listRoomSources",
            "The room's sources",
            Lane::Bearer(&[ROOMS_READ]),
        )
    },
    Route {
        idempotency_key: true,
        request: Some(request::<CreateSourceRequest>),
        ok: &[(201, response::<SourceCreated>), (200, response::<SourceCreated>)],
        ..op(
            "post",
            "/api/v1/rooms/{room_id}/sources",
            "createRoomSource",
            "Register a room source",
            Lane::Bearer(&[ROOM_SOURCES_MANAGE]),
        )
    },
    // Producer ingress.
    Route {
        request: Some(request::<Manifest>),
        ok: &[(200, response::<ManifestReceipt>)],
        ..op(
            "post",
            "/api/ingress/room-sources/manifest",
            "registerManifest",
            "Register the source's manifest",
            Lane::SourceCredential,
        )
    },
    Route {
        request: Some(request::<ObservationBatch>),
        ok: &[(202, response::<ObservationReceipt>)],
        ..op(
            "post",
            "/api/ingress/room-sources/observations",
            "ingestObservations",
            "Send a batch of observations",
            Lane::SourceCredential,
        )
    },
    Route {
        ok: &[(200, response::<ProbeList>)],
        ..op(
            "get",
            "/api/ingress/room-sources/probes",
            "pendingProbes",
            "The source's pending probes",
            Lane::SourceCredential,
        )
    },
    Route {
        request: Some(request::<ProbeAnswer>),
        ok: &[(202, response::<ProbeAnswerReceipt>)],
        ..op(
            "post",
            "/api/ingress/room-sources/probes/{probe_id}/answer",
            "answerProbe",
            "Answer a probe",
            Lane::SourceCredential,
        )
    },
    // Player embodiment: the REST twins of the MCP tools.
    Route {
        ok: &[(200, response::<SubjectList>)],
        ..op(
            "get",
            "/api/v1/rooms/{room_id}/environment-subjects",
            "listEnvironmentSubjects",
            "The room's environment subjects and the caller's own binding",
            Lane::Bearer(&[ROOMS_READ]),
        )
    },
    Route {
        request: Some(request::<SelectBody>),
        ok: &[(200, response::<SubjectSelection>)],
        ..op(
            "post",
            "/api/v1/rooms/{room_id}/environment-subjects/select",
            "selectEnvironmentSubject",
            "Bind the caller to one subject (and take its control lease)",
            ACT_W,
        )
    },
    Route {
        idempotency_key: true,
        request: Some(request::<ActionBody>),
        ok: &[(202, response::<WorkflowView>)],
        ..op(
            "post",
            "/api/v1/rooms/{room_id}/player-actions",
            "playerAction",
            "Queue one typed action on the caller's subject (answers at once)",
            ACT_W,
        )
    },
    Route {
        ok: &[(200, response::<WorkflowView>)],
        ..op(
            "get",
            "/api/v1/rooms/{room_id}/player-workflows/{workflow_ref}",
            "playerWorkflowStatus",
            "A player workflow's status",
            ACT_R,
        )
    },
    Route {
        request: Some(request::<ControlBody>),
        ok: &[(200, response::<WorkflowView>)],
        ..op(
            "post",
            "/api/v1/rooms/{room_id}/player-workflows/{workflow_ref}/control",
            "playerWorkflowControl",
            "Resume, cancel or emergency-stop a player workflow",
            ACT_W,
        )
    },
    // The southbound connector protocol (the connector credential).
    Route {
        request: Some(request::<RegisterRequest>),
        ok: &[(200, response::<RegisterReceipt>)],
        ..op(
            "post",
            "/api/connectors/v1/register",
            "registerConnector",
            "Register the connector (raises the epoch)",
            Lane::ConnectorCredential,
        )
    },
    Route {
        request: Some(request::<PollRequest>),
        ok: &[(200, response::<PollResponse>)],
        ..op(
            "post",
            "/api/connectors/v1/poll",
            "pollConnector",
            "Acknowledge, and take leased commands, the cancel list and the stop state",
            Lane::ConnectorCredential,
        )
    },
    // The cookie lane's JSON routes.
    Route {
        ok: &[(200, response::<BindingList>)],
        ..op(
            "get",
            "/api/account/session/agent-bindings",
            "listAgentBindings",
            "The account's agent bindings",
            Lane::Cookie,
        )
    },
    Route {
        ok: &[(200, response::<Revocation>)],
        ..op(
            "delete",
            "/api/account/session/agent-bindings/{binding_ref}",
            "revokeAgentBinding",
            "Revoke an agent binding",
            Lane::Cookie,
        )
    },
    Route {
        query: RUN_LIST,
        ok: &[(200, response::<RunListView>)],
        ..op("get", "/api/account/runs", "listAccountRuns", "The runs of the account's agents", Lane::Cookie)
    },
    Route {
        ok: &[(200, response::<RunView>)],
        ..op("get", "/api/account/runs/{run_id}", "inspectAccountRun", "Inspect a run of the account", Lane::Cookie)
    },
    Route {
        query: EVENTS,
        ok: &[(200, response::<EventPageView>)],
        ..op(
            "get",
            "/api/account/runs/{run_id}/events",
            "listAccountRunEvents",
            "A page of the run's events",
            Lane::Cookie,
        )
    },
    Route {
        ok: &[(200, response::<EvidenceBundleView>)],
        ..op(
            "get",
            "/api/account/runs/{run_id}/evidence",
            "fetchAccountRunEvidence",
            "The run's evidence bundle",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<CancelRequest>),
        ok: &[(200, response::<RunView>)],
        ..op(
            "post",
            "/api/account/runs/{run_id}/cancel",
            "cancelAccountRun",
            "Cancel a run of the account",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<CredentialClaimRequest>),
        ok: &[(201, response::<SourceCredential>)],
        ..op(
            "post",
            "/api/account/room-sources/credential-claims",
            "claimSourceCredential",
            "Claim a source credential",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<SourceRef>),
        ok: &[(201, response::<SourceCredential>)],
        ..op(
            "post",
            "/api/account/room-sources/rotations",
            "rotateSourceCredential",
            "Rotate a source credential",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<SourceRef>),
        ok: &[(200, response::<SourceRevocation>)],
        ..op("post", "/api/account/room-sources/revocations", "revokeSource", "Revoke a source", Lane::Cookie)
    },
    Route {
        request: Some(request::<PairingRequest>),
        ok: &[(201, response::<PairingCreated>)],
        ..op(
            "post",
            "/api/account/room-connectors/pairings",
            "pairActionConnector",
            "Pair an action connector (its credential and configuration shown once)",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<ClearStopRequest>),
        ok: &[(200, response::<StopCleared>)],
        ..op(
            "post",
            "/api/account/room-connectors/emergency-stop/clear",
            "clearEmergencyStop",
            "Clear an environment's Emergency Stop (a person only)",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<PairingRoom>),
        ok: &[(200, response::<PairingCreated>)],
        ..op(
            "post",
            "/api/account/room-connectors/{environment_binding_id}/rotate",
            "rotateActionConnector",
            "Rotate an action connector's credential (the new one shown once; the old one refused at once)",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<PairingRoom>),
        ok: &[(200, response::<PairingRevoked>)],
        ..op(
            "post",
            "/api/account/room-connectors/{environment_binding_id}/revoke",
            "revokeActionConnector",
            "Revoke an action connector's pairing for good (its open workflows ended)",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<RegionRequest>),
        ok: &[(200, response::<RegionSet>)],
        ..op(
            "post",
            "/api/account/room-connectors/{environment_binding_id}/region",
            "setConnectorRegion",
            "Set or clear the box every action of an environment binding must stay in",
            Lane::Cookie,
        )
    },
    Route {
        request: Some(request::<ObserverRequest>),
        ok: &[(201, response::<ObserverCreated>)],
        ..op(
            "post",
            "/api/agi/agent-run-observer/bindings",
            "createObserver",
            "Issue a chat claim handle for this browser chat",
            Lane::Cookie,
        )
    },
    Route {
        ok: &[(200, response::<ObserverView>)],
        ..op(
            "get",
            "/api/agi/agent-run-observer/bindings/{observer_ref}",
            "readObserver",
            "The observer binding: status and the one terminal message",
            Lane::Cookie,
        )
    },
    Route {
        ok: &[(200, response::<ObserverDisconnect>)],
        ..op(
            "delete",
            "/api/agi/agent-run-observer/bindings/{observer_ref}",
            "disconnectObserver",
            "Disconnect the observer",
            Lane::Cookie,
        )
    },
    Route {
        query: EVENTS,
        ok: &[(200, response::<ObserverEventPage>)],
        ..op(
            "get",
            "/api/agi/agent-run-observer/bindings/{observer_ref}/events",
            "listObserverEvents",
            "A page of the bound run's progress receipts",
            Lane::Cookie,
        )
    },
];
