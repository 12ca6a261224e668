//! The Device Check tool (the one row of `/mcp/device-check`): source connection health of
//! the caller's rooms, from the source service.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Cx, Reply};
use crate::error::ApiError;

/// Arguments of helix_environment_device_check: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceCheckArgs {}

pub async fn check(cx: Cx<'_>, _: DeviceCheckArgs) -> Result<impl Reply, ApiError> {
    cx.services.sources.device_check(cx.caller).await
}
