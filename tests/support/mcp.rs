//! JSON-RPC over an MCP endpoint (`/mcp`, `/mcp/device-check`, ...) as a bearer client
//! sends it. Knows the transport headers only, no tool.

use serde_json::{Value, json};

use crate::{TestApp, read};

impl TestApp {
    /// One JSON-RPC request (`id` 1) of `method` with `params` to the endpoint at `path`.
    pub async fn rpc(&self, path: &str, token: &str, method: &str, params: Value) -> (u16, Value) {
        let res = self
            .post(path, token)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }))
            .send()
            .await
            .unwrap();
        read(res).await
    }
}
