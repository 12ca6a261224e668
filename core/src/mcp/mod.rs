//! The MCP facade: one front (`front`) instantiated per catalog, `POST /mcp` with the full
//! catalog and `POST /mcp/device-check` with its one read-only tool. Tools frame the same
//! `Services` calls as REST. Depends on the service layer and the HTTP pipeline; nothing
//! below it depends on this module.

pub mod apps;
pub mod call_context;
pub mod catalog;
pub mod front;
pub mod output;
pub mod preflight;
pub mod server;
pub mod task_request;
pub mod tasks;
pub mod tools;
pub mod validate;

use axum::Router;

use crate::http::{AppState, Group};
use catalog::Front;

pub const PATH: &str = "/mcp";

/// `/mcp`: the run, room and source tools.
pub static MCP: Front = Front { path: PATH, group: Group::Mcp, catalog: &catalog::MCP };

/// `/mcp/device-check`: a second server publishing exactly one tool,
/// `helix_environment_device_check` (scope `helix.rooms.read`, as its protected-resource
/// metadata advertises), so a read-only plugin cannot discover the run, room, source or
/// command catalog. Same front, preflight rules and service layer as `/mcp`.
pub static DEVICE_CHECK: Front =
    Front { path: "/mcp/device-check", group: Group::DeviceCheck, catalog: &catalog::DEVICE_CHECK };

/// The `/mcp` route.
pub fn router(state: AppState) -> Router {
    front::router(&MCP, state)
}

/// The `/mcp/device-check` route.
pub fn device_check_router(state: AppState) -> Router {
    front::router(&DEVICE_CHECK, state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_front_is_served_where_its_protected_resource_metadata_points() {
        for front in [&MCP, &DEVICE_CHECK] {
            assert_eq!(front.path, front.group.resource_path());
        }
    }
}
