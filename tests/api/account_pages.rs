//! The account pages over real HTTP: server-rendered with a strict policy, the agent-access
//! page and manifest (with this server's or the MCP function's URL), the account page's
//! bindings, and the OpenAPI document they link.

use helix_integration_tests::*;
use reqwest::StatusCode;
use serde_json::Value;

use super::account::{Browser, location};

#[tokio::test]
async fn the_pages_are_server_rendered_with_a_strict_policy() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    for path in ["/agent-access", "/account"] {
        let res = browser.get(path).await;
        assert_eq!(res.status(), StatusCode::OK);
        let h = res.headers().clone();
        assert_eq!(h["cache-control"], "no-store");
        assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("script-src"), "no script at all");
        assert!(h.get("x-request-id").is_some());
        let html = res.text().await.unwrap();
        assert!(!html.contains("<script"), "no inline script: {path}");
    }
    let page = browser.get("/agent-access").await.text().await.unwrap();
    for client in ["Codex", "Claude Code", "ChatGPT developer mode", "OpenAI Responses API", "Gemini Interactions API"]
    {
        assert!(page.contains(client), "{client}");
    }
    let resource = format!("{}/mcp", app.base);
    assert!(page.contains(&resource));
    assert!(
        page.contains("require_approval: &quot;always&quot;") || page.contains("require_approval: &#34;always&#34;"),
        "{page}"
    );
    assert!(!page.contains("&#34;never&#34;") && !page.contains("&quot;never&quot;"), "no call runs without approval");
    let manifest: Value = browser.get("/agent-access.json").await.json().await.unwrap();
    assert_eq!(manifest["resource"], resource.as_str());
    assert_eq!(manifest["clients"].as_object().unwrap().len(), 9);
    let unreachable = page.matches(r#"class="needs-https" data-available="no""#).count();
    assert_eq!(unreachable, 3, "ChatGPT, Responses and Gemini Interactions cannot reach a loopback server");
    let meta: Value = browser.get("/.well-known/oauth-protected-resource/mcp").await.json().await.unwrap();
    assert_eq!(meta["resource_documentation"], format!("{}/agent-access", app.base));
}

/// Where the MCP function is its own public origin (its function URL, HELIX_AGENT_MCP_URL on
/// the account function), the page and manifest give clients that URL and its metadata,
/// while REST keeps the canonical base.
#[tokio::test]
async fn the_agent_access_page_gives_the_mcp_function_url_when_that_is_the_mcp_origin() {
    const FN_MCP: &str = "https://abc123.lambda-url.us-east-1.on.aws/mcp";
    let app = TestApp::spawn_live(Backend::Embedded, &[("HELIX_AGENT_MCP_URL", FN_MCP)]).await;
    let mut browser = Browser::new(&app);
    let manifest: Value = browser.get("/agent-access.json").await.json().await.unwrap();
    assert_eq!(manifest["mcp_url"], FN_MCP);
    assert_eq!(manifest["resource"], FN_MCP);
    assert_eq!(
        manifest["protected_resource_metadata"],
        "https://abc123.lambda-url.us-east-1.on.aws/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(manifest["rest_base_url"], format!("{}/api/v1/agent-runs", app.base));
    let codex: String =
        manifest["clients"]["codex"]["steps"].as_array().unwrap().iter().map(|s| s["text"].as_str().unwrap()).collect();
    assert!(codex.contains(&format!("url = \"{FN_MCP}\"")), "{codex}");
    let page = browser.get("/agent-access").await.text().await.unwrap();
    assert!(page.contains(FN_MCP), "the page names the function URL");
    assert!(!page.contains(&format!("{}/mcp\"", app.base)), "and not the canonical /mcp");
}

#[tokio::test]
async fn the_agent_access_manifest_gives_each_client_its_setup_with_this_servers_url() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    let res = browser.get("/agent-access.json").await;
    assert_eq!(res.status(), StatusCode::OK);
    let body = res.text().await.unwrap();
    assert!(!body.contains("eyJ"), "no token in the manifest");
    let manifest: Value = serde_json::from_str(&body).unwrap();
    let resource = format!("{}/mcp", app.base);
    let clients = &manifest["clients"];
    let text = |id: &str| -> String {
        let steps = clients[id]["steps"].as_array().unwrap_or_else(|| panic!("{id} has steps"));
        steps.iter().map(|s| s["text"].as_str().unwrap()).collect()
    };
    let ids = [
        "codex",
        "codex-rooms",
        "claude-code",
        "chatgpt",
        "openai-responses",
        "gemini-interactions",
        "gemini-cli",
        "mcp-remote",
        "mcp-inspector",
    ];
    for id in ids {
        assert!(text(id).contains(&resource), "{id} names {resource}");
        assert!(clients[id]["works"].as_str().is_some_and(|w| !w.is_empty()), "{id}");
    }
    let codex = text("codex");
    for needle in [
        format!("oauth_resource = \"{resource}\""),
        "scopes = [".into(),
        "enabled_tools = [".into(),
        "tool_timeout_sec = 360".into(),
        "codex mcp login helix".into(),
        "bearer_token_env_var = \"CASIMIRBOT_MCP_ACCESS_TOKEN\"".into(),
    ] {
        assert!(codex.contains(&needle), "{needle} in {codex}");
    }
    // The second Codex profile has its own entry name, and the manifest says which.
    assert_eq!(clients["codex"]["server_name"], "helix");
    assert_eq!(clients["codex-rooms"]["server_name"], "helix_rooms");
    assert!(
        text("codex-rooms").contains("codex mcp login helix_rooms")
            && text("codex-rooms").contains("\"helix.rooms.manage\"")
    );
    assert!(text("openai-responses").contains("require_approval: \"always\""));
    assert!(text("gemini-interactions").contains("type: \"mcp_server\""));
    // The test server is plain http on loopback: the hosted clients cannot reach it.
    for (id, available) in
        [("codex", true), ("chatgpt", false), ("openai-responses", false), ("gemini-interactions", false)]
    {
        assert_eq!(clients[id]["available"], available, "{id}");
    }
    assert_eq!(clients["chatgpt"]["needs_public_https"], true);
}

#[tokio::test]
async fn the_account_page_shows_the_bindings_with_revoke_buttons() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    let page = browser.get("/account").await.text().await.unwrap();
    assert!(page.contains("id=\"sign-in\""));
    browser.sign_in("alice", "tenant-a").await;
    browser.allow_agents("alice", "tenant-a").await;
    let page = browser.get("/account").await.text().await.unwrap();
    let (_, list) = browser.bindings().await;
    let reference = list["bindings"][0]["binding_ref"].as_str().unwrap();
    assert!(page.contains(reference) && page.contains("class=\"revoke\""), "{page}");
    assert!(!page.contains("alice") && !page.contains("tenant-a"), "opaque references only");
    // Revoke asks first: the account page with the confirmation, nothing revoked yet.
    let res = browser.post("/account/agent-bindings/revoke", &[("binding_ref", reference)]).await;
    assert_eq!(res.status(), StatusCode::OK);
    let page = res.text().await.unwrap();
    assert!(page.contains("id=\"confirm-revoke-binding\"") && page.contains(reference), "{page}");
    assert_eq!(browser.bindings().await.1["oauth_ready"], true, "not revoked before the confirmation");
    let res = browser.post("/account/agent-bindings/revoke", &[("binding_ref", reference), ("confirm", "yes")]).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), "/account");
    assert_eq!(browser.bindings().await.1["oauth_ready"], false);
}

/// `GET /openapi.json` needs no credential, answers the committed document with the
/// pipeline's headers, and the agent-access page links it.
#[tokio::test]
async fn the_openapi_document_is_served_without_a_credential_and_linked() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    let res = reqwest::get(format!("{}/openapi.json", app.base)).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let h = res.headers().clone();
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(h["cache-control"], "no-store");
    assert!(h.get("x-request-id").is_some());
    let text = res.text().await.unwrap();
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json")).unwrap();
    assert!(text == committed, "the served document is the committed copy");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["paths"]["/api/v1/agent-runs"]["post"]["security"][0]["oauth2"][0], "helix.agent_runs.write");
    let page = browser.get("/agent-access").await.text().await.unwrap();
    assert!(page.contains(r#"href="/openapi.json""#), "{page}");
}
