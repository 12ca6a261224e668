//! The provider invocations: one OpenAI Responses request with the target as a remote MCP
//! tool, and one Gemini `generateContent` with `helix_run_start` as its only function.
//! Each offers exactly one tool (`helix_run_start`), admits at most one call of it, and
//! only with the one-step, 60-second budget; nothing here ever continues a run.

use serde_json::{Value, json};

use super::mcp::{self, Catalog, START_TOOL};
use super::report::Check;
use super::settings::{ACCESS_TOKEN, GEMINI_API_KEY, OPENAI_API_KEY, Provider, Settings};
use super::{Http, excerpt};

pub const OPENAI: &str = "openai_responses_invocation";
pub const GEMINI: &str = "gemini_function_call_invocation";
pub const MAX_STEPS: u64 = 1;
pub const EXPIRES_IN_SECONDS: i64 = 60;

/// The arguments the model is asked to pass: a fresh key and the bounded budget.
pub fn start_arguments(provider: &str) -> Value {
    let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
    json!({
        "idempotency_key": format!("conformance-{provider}-{nanos:x}-{:x}", std::process::id()),
        "request": {
            "objective": "Provider conformance probe: confirm that a bounded Helix run can be started.",
            "budget": { "max_steps": MAX_STEPS, "expires_in_seconds": EXPIRES_IN_SECONDS },
        },
    })
}

fn prompt(args: &Value) -> String {
    format!(
        "This is an automated connection check. Call the tool {START_TOOL} exactly once, with exactly these \
         arguments and no others: {args}. Do not call any other tool and do not continue the run."
    )
}

/// The model's proposed arguments are admitted only with the one-step, 60-second budget.
pub fn admit_arguments(args: &Value) -> Result<(), String> {
    let budget = &args["request"]["budget"];
    if budget["max_steps"].as_u64() != Some(MAX_STEPS)
        || budget["expires_in_seconds"].as_i64() != Some(EXPIRES_IN_SECONDS)
    {
        return Err(format!(
            "the provider proposed {START_TOOL} without the one-step, {EXPIRES_IN_SECONDS}-second budget; not executed"
        ));
    }
    Ok(())
}

/// The created run must be fresh, one-step and expire within 60 seconds; its id.
pub fn check_run(view: &Value) -> Result<String, String> {
    let id = view["run_id"].as_str().ok_or("the tool result is not a run (no run_id)")?;
    let budget = &view["budget"];
    if budget["max_steps"].as_u64() != Some(MAX_STEPS) || budget["steps_used"].as_u64() != Some(0) {
        return Err("the created run is not a fresh one-step run".into());
    }
    let at = |v: &Value| v.as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok());
    match (at(&view["created_at"]), at(&budget["expires_at"])) {
        (Some(created), Some(expires)) if (expires - created).num_seconds() <= EXPIRES_IN_SECONDS => Ok(id.to_owned()),
        _ => Err(format!("the created run does not expire within {EXPIRES_IN_SECONDS} seconds")),
    }
}

fn ready<'a>(
    name: &'static str,
    provider: &'a Option<Result<Provider, String>>,
    key_env: &str,
    s: &Settings,
) -> Result<&'a Provider, Check> {
    match provider {
        None => Err(Check::skipped(name, format!("{key_env} is not set"))),
        Some(Err(why)) => Err(Check::fail(name, format!("refused, no request sent: {why}"))),
        Some(Ok(_)) if s.access_token.is_none() => {
            Err(Check::fail(name, format!("{key_env} is set but {ACCESS_TOKEN} is not; the provider needs it")))
        }
        Some(Ok(p)) => Ok(p),
    }
}

/// OpenAI Responses: the target as an `mcp` tool limited to `helix_run_start`, approval
/// always required. The probe approves exactly one proposed call, after checking its budget.
pub async fn openai(http: &Http, s: &Settings) -> Check {
    let p = match ready(OPENAI, &s.openai, OPENAI_API_KEY, s) {
        Ok(p) => p,
        Err(check) => return check,
    };
    match openai_flow(http, s, p).await {
        Ok(run_id) => Check::pass(OPENAI, "the provider listed and called helix_run_start once; one bounded run")
            .with_details(json!({ "run_id": run_id, "tool": START_TOOL })),
        Err(why) => Check::fail(OPENAI, why),
    }
}

fn mcp_tool(s: &Settings) -> Value {
    json!({
        "type": "mcp",
        "server_label": "casimirbot",
        "server_description": "Bounded Helix specialist runs with evidence and provenance.",
        "server_url": s.mcp_url(),
        "authorization": s.access_token,
        "allowed_tools": [START_TOOL],
        "require_approval": "always",
    })
}

async fn responses(http: &Http, p: &Provider, body: &Value) -> Result<Value, String> {
    let url = format!("{}/v1/responses", p.base);
    http.send(http.client().post(url).bearer_auth(&p.api_key).json(body)).await?.ok_json()
}

fn items<'a>(response: &'a Value, kind: &str) -> Vec<&'a Value> {
    response["output"].as_array().map(|o| o.iter().filter(|i| i["type"] == kind).collect()).unwrap_or_default()
}

async fn openai_flow(http: &Http, s: &Settings, p: &Provider) -> Result<String, String> {
    let args = start_arguments("openai");
    let first = json!({
        "model": p.model, "input": prompt(&args), "tools": [mcp_tool(s)], "max_tool_calls": 1,
    });
    let proposed = responses(http, p, &first).await?;
    for listed in items(&proposed, "mcp_list_tools") {
        if !listed["error"].is_null() {
            return Err(format!(
                "the provider could not list the MCP tools: {}",
                excerpt(&listed["error"].to_string())
            ));
        }
        if !listed["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == START_TOOL)) {
            return Err(format!("the provider's tool list lacks {START_TOOL}"));
        }
    }
    let requests = items(&proposed, "mcp_approval_request");
    let request = match requests.as_slice() {
        [one] if one["name"] == START_TOOL => *one,
        [] => return Err(format!("the provider proposed no {START_TOOL} call")),
        _ => return Err("the provider proposed other or more than one tool call; none approved".into()),
    };
    let proposed_args: Value = request["arguments"]
        .as_str()
        .and_then(|a| serde_json::from_str(a).ok())
        .ok_or("the proposed call's arguments are not a JSON string")?;
    admit_arguments(&proposed_args)?;
    let (Some(response_id), Some(request_id)) = (proposed["id"].as_str(), request["id"].as_str()) else {
        return Err("the provider's answer lacks a response id or approval request id".into());
    };
    let approve = json!({
        "model": p.model,
        "previous_response_id": response_id,
        "tools": [mcp_tool(s)],
        "max_tool_calls": 1,
        "input": [{ "type": "mcp_approval_response", "approval_request_id": request_id, "approve": true }],
    });
    let done = responses(http, p, &approve).await?;
    let calls = items(&done, "mcp_call");
    let call = match calls.as_slice() {
        [one] if one["name"] == START_TOOL => *one,
        _ => return Err(format!("the provider did not report exactly one {START_TOOL} call")),
    };
    if !call["error"].is_null() {
        return Err(format!("the MCP call failed at the provider: {}", excerpt(&call["error"].to_string())));
    }
    let view: Value = call["output"]
        .as_str()
        .and_then(|o| serde_json::from_str(o).ok())
        .ok_or("the mcp_call output is not a JSON run")?;
    check_run(&view)
}

/// Gemini: one function declaration from the published `helix_run_start` schema; when the
/// model returns exactly one call of it with the bounded budget, the probe executes that
/// one `tools/call` over MCP itself.
pub async fn gemini(http: &Http, s: &Settings, catalog: Option<&Catalog>) -> Check {
    let p = match ready(GEMINI, &s.gemini, GEMINI_API_KEY, s) {
        Ok(p) => p,
        Err(check) => return check,
    };
    let Some(catalog) = catalog else {
        return Check::fail(GEMINI, "needs the helix_run_start schema from a passing mcp_tools_list");
    };
    match gemini_flow(http, s, p, catalog).await {
        Ok(run_id) => Check::pass(GEMINI, "the model called helix_run_start once; the probe ran it; one bounded run")
            .with_details(json!({ "run_id": run_id, "tool": START_TOOL })),
        Err(why) => Check::fail(GEMINI, why),
    }
}

async fn gemini_flow(http: &Http, s: &Settings, p: &Provider, catalog: &Catalog) -> Result<String, String> {
    let args = start_arguments("gemini");
    let tool = &catalog.start_tool;
    let body = json!({
        "contents": [{ "role": "user", "parts": [{ "text": prompt(&args) }] }],
        "tools": [{ "functionDeclarations": [{
            "name": START_TOOL,
            "description": tool["description"],
            "parametersJsonSchema": tool["inputSchema"],
        }] }],
        "toolConfig": { "functionCallingConfig": { "mode": "ANY", "allowedFunctionNames": [START_TOOL] } },
    });
    let url = format!("{}/v1beta/models/{}:generateContent", p.base, p.model);
    let reply = http.send(http.client().post(url).header("x-goog-api-key", &p.api_key).json(&body)).await?;
    let answer = reply.ok_json()?;
    let calls: Vec<&Value> = answer["candidates"][0]["content"]["parts"]
        .as_array()
        .map(|parts| parts.iter().filter_map(|part| part.get("functionCall")).collect())
        .unwrap_or_default();
    let call = match calls.as_slice() {
        [one] if one["name"] == START_TOOL => *one,
        [] => return Err(format!("the model returned no {START_TOOL} function call")),
        _ => return Err("the model returned other or more than one function call; none executed".into()),
    };
    admit_arguments(&call["args"])?;
    let view = mcp::call_tool(http, s, catalog, START_TOOL, &call["args"]).await?;
    check_run(&view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_one_step_sixty_second_budget_is_admitted() {
        assert!(admit_arguments(&start_arguments("t")).is_ok());
        for budget in [json!(null), json!({"max_steps": 2, "expires_in_seconds": 60}), json!({"max_steps": 1})] {
            let mut args = start_arguments("t");
            args["request"]["budget"] = budget.clone();
            assert!(admit_arguments(&args).is_err(), "{budget}");
        }
    }

    #[test]
    fn a_created_run_must_be_fresh_one_step_and_short() {
        let run = |steps: u64, used: u64, expires: &str| {
            json!({"run_id": "run_x", "created_at": "2026-01-01T00:00:00Z",
                   "budget": {"max_steps": steps, "steps_used": used, "expires_at": expires}})
        };
        assert_eq!(check_run(&run(1, 0, "2026-01-01T00:01:00Z")).unwrap(), "run_x");
        assert!(check_run(&run(12, 0, "2026-01-01T00:01:00Z")).is_err());
        assert!(check_run(&run(1, 1, "2026-01-01T00:01:00Z")).is_err());
        assert!(check_run(&run(1, 0, "2026-01-01T01:00:00Z")).is_err());
        assert!(check_run(&json!({"error": "x"})).is_err());
    }
}
