//! Whether a tool call asks to be answered with a task (the Tasks extension,
//! `io.modelcontextprotocol/tasks`), read by the catalog (which declares the extension) and
//! the server (which routes the call); the task handlers themselves are `tasks`.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use super::call_context::call_context;
use crate::service::runs::RunService;

/// The one tool that may answer with a task.
pub const TASK_TOOL: &str = "helix_run_continue";

/// Whether this call may be answered with a task: the task tool, a request that declared
/// the extension (per request on 2026-07-28, or in a handshake the SDK kept), and a process
/// that can run the turn after answering, or a worker that takes it (`RunService::accepts_async`).
pub fn requested(tool: &str, context: &RequestContext<RoleServer>, runs: &RunService) -> bool {
    tool == TASK_TOOL
        && runs.accepts_async(call_context(context).invocation)
        && context.client_capabilities().is_some_and(|c| c.supports_tasks())
}
