//! The bearer lanes of agents: `/api/v1/agent-runs/*`, `/api/v1/rooms/*` with the
//! player-embodiment twins of the MCP tools, and the protected-resource metadata. These
//! routes never read the cookie: nothing here imports `browser` or `pages`.

pub mod actor;
pub mod agent_runs;
pub mod discovery;
pub mod player_actions;
pub mod prefer;
pub mod rooms;
