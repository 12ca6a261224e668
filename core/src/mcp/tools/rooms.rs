//! The Shared Live Room tools: their strict arguments and one handler each over the room
//! services REST uses.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Cx, Reply, key};
use crate::domain::room::{ChatClaimRequest, CreateRoomRequest, RunBindingRequest};
use crate::error::ApiError;

/// Name of the one tool whose arguments may carry the browser-issued chat claim handle.
pub const CLAIM_TOOL: &str = "helix_room_claim_chat_binding";

/// Arguments of helix_room_list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// The next_cursor of the previous page, to read the next page (omit for the first page).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Arguments of helix_room_inspect.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomArgs {
    /// The room (room_...), as returned by helix_room_create or helix_room_list.
    pub room_id: String,
}

/// Arguments of helix_room_create.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRoomArgs {
    /// Caller-chosen key of 8-200 visible ASCII characters, fresh for each distinct room. The same key with the same request replays the stored result; with a different request it is idempotency_conflict.
    pub idempotency_key: String,
    /// The create request (the body of POST /api/v1/rooms). The owner is derived from the caller.
    pub request: CreateRoomRequest,
}

/// Arguments of helix_room_bind_run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BindRunArgs {
    /// The run-binding request: the room and the caller's own run. A run has at most one active room binding.
    pub request: RunBindingRequest,
}

/// Arguments of helix_room_claim_chat_binding.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimChatArgs {
    /// The one-time chat claim: the handle the signed-in browser showed the user, and the caller's own run.
    pub request: ChatClaimRequest,
}

/// Arguments of the two withdrawal tools.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BindingRefArgs {
    /// The opaque binding reference (rrb_... for a run binding, rcb_... for a claimed chat).
    pub binding_ref: String,
}

/// A room command request. Command execution is not enabled: the request is never executed.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandRequest {
    /// The command text (never executed).
    pub command: String,
}

/// Arguments of helix_room_command_request.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandArgs {
    /// The room (room_...).
    pub room_id: String,
    /// The disabled command request.
    pub request: CommandRequest,
}

pub async fn list(cx: Cx<'_>, a: ListArgs) -> Result<impl Reply, ApiError> {
    cx.services.rooms.list_rooms(cx.caller, a.cursor.as_deref()).await
}

pub async fn inspect(cx: Cx<'_>, a: RoomArgs) -> Result<impl Reply, ApiError> {
    cx.services.rooms.inspect_room(cx.actor, &a.room_id).await
}

pub async fn create(cx: Cx<'_>, a: CreateRoomArgs) -> Result<impl Reply, ApiError> {
    cx.services.rooms.create_room(cx.caller, &key(&a.idempotency_key)?, a.request).await
}

/// The receipt alone (the flag beside it picks REST's status code).
pub async fn bind_run(cx: Cx<'_>, a: BindRunArgs) -> Result<impl Reply, ApiError> {
    cx.services.rooms.bind_run(cx.caller, a.request).await.map(|(_, receipt)| receipt)
}

pub async fn claim_chat(cx: Cx<'_>, a: ClaimChatArgs) -> Result<impl Reply, ApiError> {
    cx.services.rooms.claim_chat(cx.caller, a.request).await
}

pub async fn unbind_run(cx: Cx<'_>, a: BindingRefArgs) -> Result<impl Reply, ApiError> {
    cx.services.rooms.unbind_run(cx.caller, &a.binding_ref).await
}

pub async fn unbind_chat(cx: Cx<'_>, a: BindingRefArgs) -> Result<impl Reply, ApiError> {
    cx.services.rooms.unbind_chat(cx.caller, &a.binding_ref).await
}

/// The arguments are checked, then the service checks the scope (a caller without it
/// learns nothing more) and gives the fixed refusal.
pub async fn command(cx: Cx<'_>, _: CommandArgs) -> Result<impl Reply, ApiError> {
    cx.services.rooms.room_command(cx.caller).await
}
