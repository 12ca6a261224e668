//! The Device Check tool (the one row of `/mcp/device-check`): source connection health of
//! the caller's rooms, from the source service.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Cx, Reply};
use crate::error::ApiError;

/// Arguments of helix_environment_device_check.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceCheckArgs {
    /// The next_cursor of the previous page, to read the next page of rooms (omit for the first page).
    #[serde(default)]
    pub cursor: Option<String>,
}

pub async fn check(cx: Cx<'_>, a: DeviceCheckArgs) -> Result<impl Reply, ApiError> {
    cx.services.sources.device_check(cx.caller, a.cursor.as_deref()).await
}
