//! The room source tools: their strict arguments and one handler each over the source
//! services REST uses.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Cx, Reply, key};
use crate::domain::source::CreateSourceRequest;
use crate::error::ApiError;

/// Arguments of helix_room_source_list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceListArgs {
    /// A room the caller owns (room_...).
    pub room_id: String,
    /// The next_cursor of the previous page of this room's sources (omit for the first page).
    #[serde(default)]
    pub cursor: Option<String>,
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

pub async fn list(cx: Cx<'_>, a: SourceListArgs) -> Result<impl Reply, ApiError> {
    cx.services.sources.list_sources(cx.caller, &a.room_id, a.cursor.as_deref()).await
}

pub async fn create(cx: Cx<'_>, a: SourceCreateArgs) -> Result<impl Reply, ApiError> {
    cx.services.sources.create_source(cx.caller, &a.room_id, &key(&a.idempotency_key)?, a.request).await
}
