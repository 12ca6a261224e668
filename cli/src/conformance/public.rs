//! The checks that need no credential: what any client can read before OAuth.

use serde_json::{Value, json};

use super::report::Check;
use super::settings::Settings;
use super::{Http, mcp};

pub const MANIFEST_PATH: &str = "/agent-access.json";
pub const MANIFEST_SCHEMA: &str = "helix.agent_access.v1";
/// The scopes a run client needs; every full metadata document must advertise them.
pub const RUN_SCOPES: [&str; 2] = ["helix.agent_runs.read", "helix.agent_runs.write"];

pub async fn checks(http: &Http, s: &Settings) -> Vec<Check> {
    let manifest = get_json(http, &format!("{}{MANIFEST_PATH}", s.base)).await;
    let metadata = get_json(http, &s.metadata_url()).await;
    vec![check_manifest(s, &manifest, metadata.as_ref().ok()), check_metadata(s, &metadata), challenge(http, s).await]
}

async fn get_json(http: &Http, url: &str) -> Result<Value, String> {
    let reply = http.send(http.client().get(url).header("Accept", "application/json")).await?;
    reply.ok_json()
}

fn strings(v: &Value) -> Option<Vec<&str>> {
    v.as_array()?.iter().map(Value::as_str).collect()
}

/// Problems shared by the manifest and the metadata: scopes and authorization servers.
/// An https target must name https authorization servers (RFC 8414 issuers); a loopback
/// development target may name its local issuer.
fn common_problems(s: &Settings, doc: &Value, problems: &mut Vec<String>) {
    match strings(&doc["scopes_supported"]) {
        Some(scopes) => {
            for scope in RUN_SCOPES.iter().filter(|s| !scopes.contains(s)) {
                problems.push(format!("scopes_supported lacks {scope}"));
            }
        }
        None => problems.push("scopes_supported is not an array of strings".into()),
    }
    match strings(&doc["authorization_servers"]) {
        Some(servers) if !servers.is_empty() => {
            if s.base.starts_with("https://") && servers.iter().any(|a| !a.starts_with("https://")) {
                problems.push("authorization_servers holds a value that is not an https URL".into());
            }
        }
        _ => problems.push("authorization_servers is not a non-empty array of strings".into()),
    }
}

fn check_manifest(s: &Settings, manifest: &Result<Value, String>, metadata: Option<&Value>) -> Check {
    const NAME: &str = "agent_access_manifest";
    let m = match manifest {
        Ok(m) => m,
        Err(e) => return Check::fail(NAME, format!("GET {MANIFEST_PATH}: {e}")),
    };
    let mut problems = Vec::new();
    if m["schema"] != MANIFEST_SCHEMA {
        problems.push(format!("schema is not {MANIFEST_SCHEMA}"));
    }
    for field in ["resource", "mcp_url"] {
        if m[field] != s.mcp_url().as_str() {
            problems.push(format!("{field} is not {}", s.mcp_url()));
        }
    }
    if m["protected_resource_metadata"] != s.metadata_url().as_str() {
        problems.push(format!("protected_resource_metadata is not {}", s.metadata_url()));
    }
    common_problems(s, m, &mut problems);
    if let Some(meta) = metadata {
        for field in ["scopes_supported", "authorization_servers"] {
            if sorted(&m[field]) != sorted(&meta[field]) {
                problems.push(format!("{field} disagrees with the protected-resource metadata"));
            }
        }
    }
    Check::from_problems(NAME, &problems, "the manifest names this MCP resource, its metadata and its scopes")
        .with_details(json!({ "url": format!("{}{MANIFEST_PATH}", s.base) }))
}

fn sorted(v: &Value) -> Option<Vec<&str>> {
    let mut items = strings(v)?;
    items.sort_unstable();
    Some(items)
}

fn check_metadata(s: &Settings, metadata: &Result<Value, String>) -> Check {
    const NAME: &str = "protected_resource_metadata";
    let m = match metadata {
        Ok(m) => m,
        Err(e) => return Check::fail(NAME, format!("GET {}: {e}", s.metadata_url())),
    };
    let mut problems = Vec::new();
    if m["resource"] != s.mcp_url().as_str() {
        problems.push(format!("resource is not {}", s.mcp_url()));
    }
    common_problems(s, m, &mut problems);
    if !strings(&m["bearer_methods_supported"]).is_some_and(|b| b.contains(&"header")) {
        problems.push("bearer_methods_supported lacks header".into());
    }
    Check::from_problems(NAME, &problems, "resource, authorization servers, scopes and bearer method as required")
        .with_details(json!({ "url": s.metadata_url() }))
}

/// `POST /mcp` initialize without a token: 401 and a Bearer challenge naming the metadata.
async fn challenge(http: &Http, s: &Settings) -> Check {
    const NAME: &str = "mcp_unauthenticated_challenge";
    let reply = match http.send(mcp::post(http, s, None, None, &mcp::initialize_body())).await {
        Ok(r) => r,
        Err(e) => return Check::fail(NAME, e),
    };
    if reply.status.as_u16() != 401 {
        return Check::fail(NAME, format!("expected HTTP 401 without a token, got {}", reply.status.as_u16()));
    }
    let header = reply.headers.get("www-authenticate").and_then(|h| h.to_str().ok()).unwrap_or_default();
    let wanted = format!("resource_metadata=\"{}\"", s.metadata_url());
    let mut problems = Vec::new();
    if !header.starts_with("Bearer ") {
        problems.push("WWW-Authenticate is not a Bearer challenge".to_owned());
    } else if !header.split(',').any(|p| p.trim().trim_start_matches("Bearer ").trim() == wanted) {
        problems.push(format!("WWW-Authenticate does not carry {wanted}"));
    }
    if reply.json().ok().and_then(|b| b["schema"].as_str().map(str::to_owned)).as_deref()
        != Some("helix.agent_api.error.v1")
    {
        problems.push("the 401 body is not a helix.agent_api.error.v1 error".into());
    }
    Check::from_problems(NAME, &problems, "401 with a Bearer challenge naming the protected-resource metadata")
}
