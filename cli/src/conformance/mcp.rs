//! The authenticated MCP checks (`initialize`, `tools/list`) and the probe's one direct
//! `tools/call`, as JSON-RPC over Streamable HTTP (stateless, JSON responses).

use reqwest::RequestBuilder;
use serde_json::{Value, json};

use super::report::Check;
use super::settings::{ACCESS_TOKEN, Settings};
use super::{Http, excerpt};

pub const PROTOCOL_VERSION: &str = "2025-06-18";
pub const START_TOOL: &str = "helix_run_start";
/// The run tools every full catalog must publish: the ones the Agent Access page
/// configures clients for (the contract's Responses example).
pub use helix_core::domain::clients::RUN_TOOLS;

/// What the authenticated checks learned, for the Gemini invocation.
pub struct Catalog {
    pub protocol_version: String,
    /// The `helix_run_start` descriptor as `tools/list` published it.
    pub start_tool: Value,
}

pub fn initialize_body() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "helix-conformance", "version": env!("CARGO_PKG_VERSION") },
        },
    })
}

/// A JSON-RPC POST to the target's `/mcp`, with the bearer when given.
pub fn post(http: &Http, s: &Settings, token: Option<&str>, version: Option<&str>, body: &Value) -> RequestBuilder {
    let mut req = http.client().post(s.mcp_url()).header("Accept", "application/json, text/event-stream").json(body);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(version) = version {
        req = req.header("MCP-Protocol-Version", version);
    }
    req
}

/// The JSON-RPC `result` of a 200 answer, else why not.
async fn rpc(http: &Http, req: RequestBuilder) -> Result<Value, String> {
    let reply = http.send(req).await?;
    let body = reply.ok_json()?;
    if let Some(err) = body.get("error") {
        return Err(format!("JSON-RPC error {}: {}", err["code"], excerpt(&err["message"].to_string())));
    }
    match body.get("result") {
        Some(result) if result.is_object() => Ok(result.clone()),
        _ => Err("the JSON-RPC answer has no result object".into()),
    }
}

/// Appends `mcp_initialize` and `mcp_tools_list`; returns the catalog when both passed.
pub async fn checks(http: &Http, s: &Settings, out: &mut Vec<Check>) -> Option<Catalog> {
    let Some(token) = s.access_token.as_deref() else {
        let why = format!("{ACCESS_TOKEN} is not set");
        out.push(Check::skipped("mcp_initialize", why.clone()));
        out.push(Check::skipped("mcp_tools_list", why));
        return None;
    };
    let initialized = rpc(http, post(http, s, Some(token), None, &initialize_body()))
        .await
        .and_then(|result| check_initialize(&result));
    let version = match &initialized {
        Ok(version) => {
            out.push(Check::pass("mcp_initialize", "initialize answered with a server, tools and a protocol version"));
            version.clone()
        }
        Err(why) => {
            out.push(Check::fail("mcp_initialize", why.clone()));
            PROTOCOL_VERSION.to_owned()
        }
    };
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    let listed = rpc(http, post(http, s, Some(token), Some(&version), &list)).await;
    match listed.and_then(|result| check_tools(&result)) {
        Ok((start_tool, count)) => {
            out.push(
                Check::pass("mcp_tools_list", "every helix_run_* tool is published with inputSchema and outputSchema")
                    .with_details(json!({ "tools": count })),
            );
            initialized.is_ok().then_some(Catalog { protocol_version: version, start_tool })
        }
        Err(why) => {
            out.push(Check::fail("mcp_tools_list", why));
            None
        }
    }
}

/// The negotiated protocol version, or what is missing.
fn check_initialize(result: &Value) -> Result<String, String> {
    let version = result["protocolVersion"].as_str().ok_or("initialize result has no protocolVersion")?;
    if !result["serverInfo"]["name"].is_string() {
        return Err("initialize result has no serverInfo.name".into());
    }
    if !result["capabilities"]["tools"].is_object() {
        return Err("initialize result does not declare the tools capability".into());
    }
    Ok(version.to_owned())
}

/// The `helix_run_start` descriptor and the catalog size, or the catalog's problems.
fn check_tools(result: &Value) -> Result<(Value, usize), String> {
    let tools = result["tools"].as_array().ok_or("tools/list result has no tools array")?;
    let mut problems = Vec::new();
    for name in RUN_TOOLS.iter().copied() {
        match tools.iter().find(|t| t["name"] == name) {
            None => problems.push(format!("{name} is missing")),
            Some(tool) => {
                if tool["inputSchema"]["type"] != "object" {
                    problems.push(format!("{name} has no object inputSchema"));
                }
                if !tool["outputSchema"].is_object() {
                    problems.push(format!("{name} has no outputSchema"));
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let start = tools.iter().find(|t| t["name"] == START_TOOL).cloned().unwrap_or_default();
    Ok((start, tools.len()))
}

/// One `tools/call` with the bearer; the tool result, or why it is not a success.
pub async fn call_tool(
    http: &Http,
    s: &Settings,
    catalog: &Catalog,
    name: &str,
    args: &Value,
) -> Result<Value, String> {
    let token = s.access_token.as_deref().ok_or_else(|| format!("{ACCESS_TOKEN} is not set"))?;
    let body = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": name, "arguments": args },
    });
    let result = rpc(http, post(http, s, Some(token), Some(&catalog.protocol_version), &body)).await?;
    if result["isError"] == true {
        let code = result["structuredContent"]["error"]["code"].as_str().unwrap_or("unknown");
        return Err(format!("{name} returned an error result ({code})"));
    }
    Ok(result["structuredContent"].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Value {
        json!({"name": name, "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}})
    }

    #[test]
    fn the_catalog_needs_every_run_tool_with_both_schemas() {
        let full: Vec<Value> = RUN_TOOLS.iter().map(|n| tool(n)).collect();
        let (start, n) = check_tools(&json!({ "tools": full })).unwrap();
        assert_eq!((start["name"].as_str(), n), (Some(START_TOOL), 6));
        let mut missing = full.clone();
        missing.remove(2);
        assert!(check_tools(&json!({ "tools": missing })).unwrap_err().contains("helix_run_inspect is missing"));
        let mut bare = full;
        bare[0]["outputSchema"] = Value::Null;
        assert!(check_tools(&json!({ "tools": bare })).unwrap_err().contains("helix_run_start has no outputSchema"));
    }
}
