//! The Shared Live Room tools: their strict arguments and their framing over the same
//! room services REST uses. The catalog rows live in `catalog` (one table, one order).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::domain::ids::IdempotencyKey;
use crate::domain::room::{ChatClaimRequest, CreateRoomRequest, RunBindingRequest};
use crate::domain::wire::to_value;
use crate::error::ApiError;
use crate::service::{Caller, Mutation, Services};

/// Name of the one tool whose arguments may carry the browser-issued chat claim handle.
pub const CLAIM_TOOL: &str = "helix_room_claim_chat_binding";

/// Arguments of helix_room_list (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

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

/// What a room tool produced: a plain value, or a mutation with its replay flag.
pub enum RoomOutcome {
    Value(Value),
    Mutation(Mutation),
}

/// The room tool operations (dispatched from `server`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomOp {
    List,
    Inspect,
    Create,
    BindRun,
    ClaimChat,
    UnbindRun,
    UnbindChat,
    Command,
}

pub async fn dispatch(services: &Services, op: RoomOp, p: &Caller, arguments: &Value) -> Result<RoomOutcome, ApiError> {
    // Strict, with the REST body's error mapping (never echoes values).
    use crate::http::parse_strict_value as parse;
    let v = arguments;
    Ok(match op {
        RoomOp::List => {
            parse::<NoArgs>(v)?;
            RoomOutcome::Value(to_value(&services.rooms.list_rooms(p).await?))
        }
        RoomOp::Inspect => {
            RoomOutcome::Value(to_value(&services.rooms.inspect_room(p, &parse::<RoomArgs>(v)?.room_id).await?))
        }
        RoomOp::Create => {
            let a: CreateRoomArgs = parse(v)?;
            let key = IdempotencyKey::parse(&a.idempotency_key).ok_or(ApiError::InvalidIdempotencyKey)?;
            RoomOutcome::Mutation(services.rooms.create_room(p, &key, a.request).await?)
        }
        RoomOp::BindRun => {
            RoomOutcome::Value(to_value(&services.rooms.bind_run(p, parse::<BindRunArgs>(v)?.request).await?.1))
        }
        RoomOp::ClaimChat => {
            RoomOutcome::Value(to_value(&services.rooms.claim_chat(p, parse::<ClaimChatArgs>(v)?.request).await?))
        }
        RoomOp::UnbindRun => {
            RoomOutcome::Value(to_value(&services.rooms.unbind_run(p, &parse::<BindingRefArgs>(v)?.binding_ref).await?))
        }
        RoomOp::UnbindChat => RoomOutcome::Value(to_value(
            &services.rooms.unbind_chat(p, &parse::<BindingRefArgs>(v)?.binding_ref).await?,
        )),
        RoomOp::Command => {
            // Scope first (a caller without it learns nothing more), then the fixed refusal.
            parse::<CommandArgs>(v)?;
            RoomOutcome::Value(services.rooms.room_command(p).await?)
        }
    })
}
