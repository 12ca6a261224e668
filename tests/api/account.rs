//! The browser lane over real HTTP: sign-in through the development OpenID provider (and a
//! misbehaving provider for the ID-token checks), sessions, allow agents, binding list and
//! revocation, and what a bearer of the same identity can do before, during and after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use helix_core::domain::account::PolicyChange;
use helix_core::http::dev_oidc::DevSigner;
use helix_integration_tests::support::browser::form_body;
use helix_integration_tests::support::events::{event_text, through_adapter};
use helix_integration_tests::support::faults::FaultPoint;
use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::*;
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};

/// A cookie-keeping browser that does not follow redirects (each hop is checked).
pub(crate) struct Browser {
    base: String,
    http: reqwest::Client,
    pub(crate) cookies: HashMap<String, String>,
}

impl Browser {
    pub(crate) fn new(app: &TestApp) -> Self {
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Self { base: app.base.clone(), http, cookies: HashMap::new() }
    }

    fn cookie_header(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    fn absorb(&mut self, res: &reqwest::Response) {
        for h in res.headers().get_all("set-cookie") {
            let text = h.to_str().unwrap();
            let (pair, attrs) = text.split_once(';').unwrap_or((text, ""));
            let (k, v) = pair.split_once('=').unwrap();
            if attrs.contains("Max-Age=0") {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.to_owned(), v.to_owned());
            }
        }
    }

    fn url(&self, path_or_url: &str) -> String {
        if path_or_url.starts_with("http") { path_or_url.to_owned() } else { format!("{}{path_or_url}", self.base) }
    }

    pub(crate) async fn get(&mut self, path: &str) -> reqwest::Response {
        let res = self.http.get(self.url(path)).header("cookie", self.cookie_header()).send().await.unwrap();
        self.absorb(&res);
        res
    }

    /// A same-origin form POST, as a browser sends it.
    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        let res = self
            .http
            .post(self.url(path))
            .header("cookie", self.cookie_header())
            .header("origin", &self.base)
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(form))
            .send()
            .await
            .unwrap();
        self.absorb(&res);
        res
    }

    async fn delete(&mut self, path: &str, origin: Option<&str>) -> reqwest::Response {
        let mut req = self.http.delete(self.url(path)).header("cookie", self.cookie_header());
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        req.send().await.unwrap()
    }

    async fn bindings(&mut self) -> (StatusCode, Value) {
        let res = self.get("/api/account/session/agent-bindings").await;
        assert_eq!(res.headers()["cache-control"], "no-store");
        (res.status(), res.json().await.unwrap_or(Value::Null))
    }

    /// From a POST that starts an intent through the development provider's login to the
    /// callback URL (not yet followed).
    async fn through_dev_provider(&mut self, start: &str, subject: &str, tenant: &str) -> String {
        self.through_dev_provider_with(start, &[], subject, tenant).await
    }

    /// [`Self::through_dev_provider`] of a start form with these fields.
    pub(crate) async fn through_dev_provider_with(
        &mut self,
        start: &str,
        fields: &[(&str, &str)],
        subject: &str,
        tenant: &str,
    ) -> String {
        let res = self.post(start, fields).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "{start}");
        // One issuer for people and agents: its /authorize sends the browser client to the
        // development sign-in page.
        let issuer_authorize = location(&res);
        assert!(issuer_authorize.starts_with(&format!("{}/authorize?", self.base)), "{issuer_authorize}");
        let res = self.get(&issuer_authorize).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        let authorize = format!("{}{}", self.base, location(&res));
        assert!(authorize.starts_with(&format!("{}/dev-oidc/authorize?", self.base)), "{authorize}");
        let page = self.get(&authorize).await;
        assert_eq!(page.status(), StatusCode::OK);
        let q = query(&authorize);
        let res = self
            .post(
                "/dev-oidc/authorize",
                &[
                    ("client_id", &q["client_id"]),
                    ("redirect_uri", &q["redirect_uri"]),
                    ("state", &q["state"]),
                    ("nonce", &q["nonce"]),
                    ("code_challenge", &q["code_challenge"]),
                    ("subject", subject),
                    ("tenant", tenant),
                ],
            )
            .await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        location(&res)
    }

    pub(crate) async fn sign_in(&mut self, subject: &str, tenant: &str) {
        let callback = self.through_dev_provider("/account/sign-in", subject, tenant).await;
        let res = self.get(&callback).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "{}", res.text().await.unwrap());
        assert!(self.cookies.contains_key("helix_session"));
    }

    async fn allow_agents(&mut self, subject: &str, tenant: &str) -> reqwest::Response {
        let callback = self.through_dev_provider("/account/allow-agents", subject, tenant).await;
        self.get(&callback).await
    }
}

pub(crate) fn location(res: &reqwest::Response) -> String {
    res.headers()["location"].to_str().unwrap().to_owned()
}

pub(crate) fn query(url: &str) -> HashMap<String, String> {
    Url::parse(url).unwrap().query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

/// A bearer of the identity, minted without the trusted link path (so nothing is linked).
fn bearer(app: &TestApp, subject: &str, tenant: &str) -> String {
    let o = &app.state.services.config.oauth;
    let scopes: Vec<String> = ["helix.agent_runs.read", "helix.agent_runs.write", "helix.data.research_library.read"]
        .map(String::from)
        .to_vec();
    helix_core::auth::jwt::mint_local_hs256(
        o.local_hs256_secret.as_ref().unwrap(),
        &o.issuer,
        &o.audience,
        subject,
        tenant,
        &scopes,
        600,
    )
}

async fn mcp_tools_list(app: &TestApp, token: &str) -> (StatusCode, Value) {
    let res = app
        .http
        .post(format!("{}/mcp", app.base))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }}}))
        .send()
        .await
        .unwrap();
    (res.status(), res.json().await.unwrap_or(Value::Null))
}

async fn rest_start(app: &TestApp, token: &str, key: &str) -> (StatusCode, Value) {
    let res = app.start(token, key, research_run()).await;
    (res.status(), res.json().await.unwrap())
}

async fn full_path(backend: Backend) {
    let app = TestApp::spawn_live(backend, &[]).await;
    let token = bearer(&app, "newcomer", "tenant-n");
    let (status, body) = rest_start(&app, &token, "before-link-0001").await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("account_not_linked")));

    let mut browser = Browser::new(&app);
    browser.sign_in("newcomer", "tenant-n").await;
    let (status, list) = browser.bindings().await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list, json!({"schema": "helix.agent_account_bindings.v1", "oauth_ready": false, "bindings": []}));
    let (status, _) = rest_start(&app, &token, "before-allow-0001").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "signing in alone does not admit agents");

    let res = browser.allow_agents("newcomer", "tenant-n").await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER, "{}", res.text().await.unwrap());
    let (_, list) = browser.bindings().await;
    assert_eq!(list["oauth_ready"], true, "{list}");
    let b = &list["bindings"][0];
    assert_eq!(list["bindings"].as_array().unwrap().len(), 1);
    assert!(b["binding_ref"].as_str().unwrap().starts_with("agent-binding:sha256:"));
    assert!(b["tenant_ref"].as_str().unwrap().starts_with("tenant:sha256:"));
    assert_eq!((b["issuer"].as_str(), b["provider"].as_str()), (Some("helix-local-issuer"), Some("helix-local")));
    assert_eq!((b["status"].as_str(), b["revoked_at"].clone()), (Some("active"), Value::Null));
    assert_eq!((b["subject_included"].clone(), b["bearer_included"].clone()), (json!(false), json!(false)));
    let text = list.to_string();
    assert!(!text.contains("newcomer") && !text.contains("tenant-n"), "no subject or tenant id: {text}");

    let (status, run) = rest_start(&app, &token, "after-allow-0001").await;
    assert_eq!(status, StatusCode::CREATED, "{run}");
    let (status, tools) = mcp_tools_list(&app, &token).await;
    assert_eq!(status, StatusCode::OK, "{tools}");

    let reference = b["binding_ref"].as_str().unwrap().to_owned();
    let path = format!("/api/account/session/agent-bindings/{reference}");
    let res = browser.delete(&path, Some(&app.base)).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let receipt: Value = res.json().await.unwrap();
    assert_eq!(receipt["revocation_status"], "revoked");
    assert_eq!(receipt["binding_status"], "revoked");
    let again: Value = browser.delete(&path, Some(&app.base)).await.json().await.unwrap();
    assert_eq!(again["revocation_status"], "already_revoked", "repeating the delete is idempotent");

    let (status, body) = rest_start(&app, &token, "after-revoke-0001").await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("account_not_linked")));
    let (status, _) = mcp_tools_list(&app, &token).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, list) = browser.bindings().await;
    assert_eq!(list["oauth_ready"], false);
    assert_eq!(list["bindings"][0]["status"], "revoked");
    assert!(list["bindings"][0]["revoked_at"].is_string());

    // Allowing again is a fresh grant with a fresh reference; the old one stays revoked.
    browser.allow_agents("newcomer", "tenant-n").await;
    let (_, list) = browser.bindings().await;
    assert_eq!(list["oauth_ready"], true);
    assert_ne!(list["bindings"][0]["binding_ref"].as_str(), Some(reference.as_str()));
    let (status, _) = rest_start(&app, &token, "after-regrant-0001").await;
    assert_eq!(status, StatusCode::CREATED);
    let stale: Value = browser.delete(&path, Some(&app.base)).await.json().await.unwrap();
    assert_eq!(stale["error"]["code"], "not_found", "a revoked grant's reference does not reach the new grant");
}

#[tokio::test]
async fn a_newcomer_signs_in_allows_agents_revokes_and_the_bearer_is_refused() {
    full_path(Backend::Embedded).await;
}

#[tokio::test]
async fn the_browser_lane_works_on_dynamodb() {
    full_path(Backend::Dynamo).await;
}

#[tokio::test]
async fn binding_routes_need_a_live_session_and_never_take_a_bearer() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    let (status, body) = browser.bindings().await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("session_required")));
    assert_eq!(body["schema"], "helix.agent_api.error.v1");

    let token = app.token().await;
    let res = app.get("/api/account/session/agent-bindings", &token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "a bearer is not a session");
    assert!(res.headers().get("www-authenticate").is_none());

    browser.cookies.insert("helix_session".into(), "ab".repeat(32));
    assert_eq!(browser.bindings().await.0, StatusCode::UNAUTHORIZED, "unknown session");

    browser.cookies.clear();
    browser.sign_in("alice", "tenant-a").await;
    assert_eq!(browser.bindings().await.0, StatusCode::OK);
    let session = browser.cookies["helix_session"].clone();
    let res = app
        .http
        .get(format!("{}/api/account/session/agent-bindings", app.base))
        .header("cookie", format!("helix_session={session}; helix_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "a doubled cookie counts as none");

    let res = app
        .http
        .get(format!("{}/api/v1/agent-runs/run_exampleid0001", app.base))
        .header("cookie", format!("helix_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "the bearer lanes never read the cookie");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "authentication_required");

    let idle = app.state.services.config.browser.session_idle.as_secs() as i64;
    app.state.services.clock.advance(idle + 1);
    assert_eq!(browser.bindings().await.0, StatusCode::UNAUTHORIZED, "idle-expired session");
}

#[tokio::test]
async fn sessions_rotate_at_sign_in_slide_while_used_and_end_at_sign_out() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    browser.sign_in("alice", "tenant-a").await;
    let first = browser.cookies["helix_session"].clone();
    browser.sign_in("alice", "tenant-a").await;
    let second = browser.cookies["helix_session"].clone();
    assert_ne!(first, second, "rotated at sign-in");
    let mut old = Browser::new(&app);
    old.cookies.insert("helix_session".into(), first);
    assert_eq!(old.bindings().await.0, StatusCode::UNAUTHORIZED, "the previous session is gone");

    // Used within the idle window, the session lives on; past the absolute limit it ends.
    let b = &app.state.services.config.browser;
    let (idle, absolute) = (b.session_idle.as_secs() as i64, b.session_absolute.as_secs() as i64);
    let mut elapsed = 0;
    while elapsed + idle - 60 < absolute {
        app.state.services.clock.advance(idle - 60);
        elapsed += idle - 60;
        assert_eq!(browser.bindings().await.0, StatusCode::OK, "after {elapsed} s of use");
    }
    app.state.services.clock.advance(absolute - elapsed + 1);
    assert_eq!(browser.bindings().await.0, StatusCode::UNAUTHORIZED, "absolute expiry");

    browser.sign_in("alice", "tenant-a").await;
    let res = browser.post("/account/sign-out", &[]).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert!(!browser.cookies.contains_key("helix_session"), "the cookie is cleared");
    let mut replay = Browser::new(&app);
    replay.cookies.insert("helix_session".into(), second);
    assert_eq!(replay.bindings().await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn session_cookies_are_http_only_lax_and_path_root() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    let callback = browser.through_dev_provider("/account/sign-in", "alice", "tenant-a").await;
    let res = browser.get(&callback).await;
    let cookies: Vec<String> =
        res.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_owned()).collect();
    let session = cookies.iter().find(|c| c.starts_with("helix_session=")).unwrap();
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/;"] {
        assert!(session.contains(attr), "{session}");
    }
    let value = session.trim_start_matches("helix_session=").split(';').next().unwrap();
    assert_eq!(value.len(), 64, "256 bits");
    assert!(!session.contains("Secure"), "loopback development is plain HTTP");
}

#[tokio::test]
async fn cross_site_cookie_mutations_are_refused() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    browser.sign_in("alice", "tenant-a").await;
    browser.allow_agents("alice", "tenant-a").await;
    let (_, list) = browser.bindings().await;
    let path = format!("/api/account/session/agent-bindings/{}", list["bindings"][0]["binding_ref"].as_str().unwrap());
    for origin in [Some("http://127.0.0.1:1"), None] {
        let res = browser.delete(&path, origin).await;
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::FORBIDDEN, Some("cross_site_request")),
            "{origin:?}"
        );
    }
    let res = browser
        .http
        .post(format!("{}/account/sign-out", app.base))
        .header("cookie", browser.cookie_header())
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let (status, list) = browser.bindings().await;
    assert_eq!((status, list["bindings"][0]["status"].as_str()), (StatusCode::OK, Some("active")), "nothing changed");
}

#[tokio::test]
async fn another_accounts_binding_ref_is_not_found() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut alice = Browser::new(&app);
    alice.sign_in("alice", "tenant-a").await;
    alice.allow_agents("alice", "tenant-a").await;
    let (_, list) = alice.bindings().await;
    let reference = list["bindings"][0]["binding_ref"].as_str().unwrap().to_owned();
    let mut bob = Browser::new(&app);
    bob.sign_in("bob", "tenant-a").await;
    let res = bob.delete(&format!("/api/account/session/agent-bindings/{reference}"), Some(&app.base)).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let res = bob.delete("/api/account/session/agent-bindings/not-a-reference", Some(&app.base)).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(alice.bindings().await.1["bindings"][0]["status"], "active");

    // Bob cannot allow agents for Alice's identity from his session.
    let res = bob.allow_agents("alice", "tenant-a").await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "identity_mismatch");
}

#[tokio::test]
async fn a_guest_account_is_refused_on_the_signed_in_lanes() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    browser.sign_in("visitor", "tenant-a").await;
    app.set_policy("visitor", PolicyChange { guest: Some(true), ..Default::default() }).await;
    let (status, body) = browser.bindings().await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("guest_not_allowed")));
    let res = browser.post("/account/allow-agents", &[]).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let page = browser.get("/account").await.text().await.unwrap();
    assert!(page.contains("guest account"), "{page}");
}

#[tokio::test]
async fn a_tampered_state_and_a_replayed_callback_fail() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    let callback = browser.through_dev_provider("/account/sign-in", "alice", "tenant-a").await;
    let q = query(&callback);
    let tampered = format!("{}/account/callback?code={}&state={}0", app.base, q["code"], &q["state"][1..]);
    let res = browser.get(&tampered).await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        (body["error"]["code"].as_str(), body["error"]["details"]["reason"].as_str()),
        (Some("sign_in_failed"), Some("state"))
    );

    let res = browser.get(&callback).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let mut replay = Browser::new(&app);
    replay.cookies = browser.cookies.clone();
    replay.cookies.remove("helix_session");
    let res = replay.get(&callback).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST, "a callback is single-use");
    assert!(!replay.cookies.contains_key("helix_session"));

    // An intent lives ten minutes.
    let callback = browser.through_dev_provider("/account/sign-in", "alice", "tenant-a").await;
    app.state.services.clock.advance(helix_core::service::sessions::INTENT_TTL_SECS + 1);
    let body: Value = browser.get(&callback).await.json().await.unwrap();
    assert_eq!(body["error"]["details"]["reason"], "state", "an expired intent: {body}");

    // Another browser (without the sign-in cookie) cannot complete someone's sign-in.
    let callback = browser.through_dev_provider("/account/sign-in", "alice", "tenant-a").await;
    let mut other = Browser::new(&app);
    let res = other.get(&callback).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(!other.cookies.contains_key("helix_session"));

    // A browser (it accepts HTML) is shown the same refusal as a page, not JSON.
    let res =
        app.http.get(&callback).header("accept", "text/html,application/xhtml+xml,*/*;q=0.8").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(res.headers().contains_key("content-security-policy"), "the page headers apply");
    let page = res.text().await.unwrap();
    assert!(page.contains(r#"data-code="sign_in_failed" data-reason="state""#), "{page}");
}

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
    assert_eq!(manifest["clients"].as_object().unwrap().len(), 6);
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
    for id in ["codex", "claude-code", "chatgpt", "openai-responses", "gemini-interactions", "gemini-cli"] {
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

/// A provider that signs whatever claims the test puts in its token answer.
#[derive(Clone, Default)]
struct Rogue {
    answers: Arc<Mutex<HashMap<String, String>>>,
}

async fn spawn_rogue(signer: Arc<DevSigner>) -> (String, Rogue) {
    use axum::routing::{get, post};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let rogue = Rogue::default();
    let (iss, s2, r2) = (base.clone(), signer.clone(), rogue.clone());
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(move || {
                let iss = iss.clone();
                async move {
                    axum::Json(json!({
                        "issuer": iss, "authorization_endpoint": format!("{iss}/authorize"),
                        "token_endpoint": format!("{iss}/token"), "jwks_uri": format!("{iss}/jwks"),
                        "response_types_supported": ["code"], "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["EdDSA"],
                    }))
                }
            }),
        )
        .route(
            "/jwks",
            get(move || {
                let s = s2.clone();
                async move { axum::Json(s.jwks()) }
            }),
        )
        .route(
            "/token",
            post(move |body: String| {
                let r = r2.clone();
                async move {
                    let code = body.split('&').find_map(|p| p.strip_prefix("code=")).unwrap_or_default().to_owned();
                    let id_token = r.answers.lock().unwrap().remove(&code).unwrap_or_default();
                    axum::Json(json!({"access_token": "x", "token_type": "Bearer", "id_token": id_token}))
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, rogue)
}

#[tokio::test]
async fn the_callback_verifies_nonce_issuer_audience_expiry_signature_and_tenant() {
    let signer = Arc::new(DevSigner::generate());
    let (issuer, rogue) = spawn_rogue(signer.clone()).await;
    let app = TestApp::spawn_live(
        Backend::Embedded,
        &[
            ("HELIX_BROWSER_DEV_PROVIDER", "0"),
            ("HELIX_BROWSER_OIDC_ISSUER", &issuer),
            ("HELIX_BROWSER_OIDC_CLIENT_ID", "helix-web"),
            ("HELIX_BROWSER_OIDC_ALGORITHMS", "EdDSA"),
        ],
    )
    .await;
    let now = chrono::Utc::now().timestamp();
    let good = |nonce: &str| {
        json!({"iss": issuer, "sub": "carol", "aud": "helix-web", "iat": now, "exp": now + 300,
               "auth_time": now, "nonce": nonce, "tenant_id": "tenant-c"})
    };
    let other_signer = Arc::new(DevSigner::generate());
    type Tamper = Box<dyn Fn(&mut Value) -> Option<String>>;
    let cases: Vec<(&str, Tamper)> = vec![
        (
            "nonce",
            Box::new(move |c| {
                c["nonce"] = json!("another-nonce");
                None
            }),
        ),
        (
            "issuer",
            Box::new(move |c| {
                c["iss"] = json!("https://elsewhere.example");
                None
            }),
        ),
        (
            "audience",
            Box::new(move |c| {
                c["aud"] = json!("another-client");
                None
            }),
        ),
        (
            "expired",
            Box::new(move |c| {
                c["exp"] = json!(now - 600);
                c["iat"] = json!(now - 900);
                None
            }),
        ),
        (
            "tenant",
            Box::new(move |c| {
                c.as_object_mut().unwrap().remove("tenant_id");
                None
            }),
        ),
        ("signature", Box::new(move |c| Some(other_signer.sign(c)))),
    ];
    for (reason, tamper) in cases {
        let mut browser = Browser::new(&app);
        let res = browser.post("/account/sign-in", &[]).await;
        let q = query(&location(&res));
        assert_eq!(q["code_challenge_method"], "S256");
        let mut claims = good(&q["nonce"]);
        let token = tamper(&mut claims).unwrap_or_else(|| signer.sign(&claims));
        let code = format!("code-{reason}");
        rogue.answers.lock().unwrap().insert(code.clone(), token);
        let res = browser.get(&format!("/account/callback?code={code}&state={}", q["state"])).await;
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{reason}: {body}");
        assert_eq!(body["error"]["details"]["reason"], reason, "{body}");
        assert!(!browser.cookies.contains_key("helix_session"), "{reason}");
    }
    let res = app.http.get(format!("{}/dev-oidc/.well-known/openid-configuration", app.base)).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND, "no development provider beside a configured one");

    // The same flow with an honest token signs in.
    let mut browser = Browser::new(&app);
    let res = browser.post("/account/sign-in", &[]).await;
    let q = query(&location(&res));
    rogue.answers.lock().unwrap().insert("code-ok".into(), signer.sign(&good(&q["nonce"])));
    let res = browser.get(&format!("/account/callback?code=code-ok&state={}", q["state"])).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(browser.bindings().await.0, StatusCode::OK);
}

#[tokio::test]
async fn link_account_writes_link_account_and_binding_in_one_transaction() {
    let app = TestApp::spawn().await;
    let o = app.state.services.config.oauth.clone();
    let id = helix_core::service::accounts::LinkIdentity {
        issuer: &o.issuer,
        tenant: "t",
        provider: &o.provider,
        subject: "dana",
    };
    app.faults.take_log();
    app.state.services.accounts.link_account(&id).await.unwrap();
    let writes: Vec<_> = app.faults.take_log().into_iter().filter(|op| *op == "put" || *op == "transact").collect();
    assert_eq!(writes, vec!["transact"], "one transaction");
    // A failed transaction leaves nothing behind: the next attempt creates everything.
    let id2 = helix_core::service::accounts::LinkIdentity { subject: "erin", ..id.clone() };
    app.faults.arm(3, FaultPoint::Before);
    assert!(app.state.services.accounts.link_account(&id2).await.is_err());
    assert!(app.state.services.accounts.show_account(&o.provider, "erin").await.is_err(), "no link was written");
    let token = bearer(&app, "erin", "t");
    assert_eq!(rest_start(&app, &token, "no-partial-link-1").await.0, StatusCode::FORBIDDEN);
    app.state.services.accounts.link_account(&id2).await.unwrap();
    assert_eq!(rest_start(&app, &token, "linked-in-one-01").await.0, StatusCode::CREATED);
}

/// Feeds one `events/account-*.json` payload through lambda_http's decoding, the Lambda
/// adapter and the composed routers, with the placeholders replaced.
async fn invoke_event(app: &TestApp, file: &str, replace: &[(&str, &str)]) -> (u16, http::HeaderMap, String) {
    let raw = event_text(file, replace);
    let (status, headers, bytes) = through_adapter(compose(app.state.clone()), file, &raw, None).await;
    assert!(headers.get("content-security-policy").is_some(), "{file}");
    (status, headers, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn every_account_event_file_is_served_by_the_account_router() {
    let signer = Arc::new(DevSigner::generate());
    let (issuer, _rogue) = spawn_rogue(signer).await;
    let app = TestApp::spawn_with(
        Backend::Embedded,
        &[
            ("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com"),
            ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"),
            ("HELIX_AGENT_ALLOWED_ORIGINS", "https://api.example.com"),
            ("HELIX_BROWSER_DEV_PROVIDER", "0"),
            ("HELIX_BROWSER_OIDC_ISSUER", &issuer),
            ("HELIX_BROWSER_OIDC_CLIENT_ID", "helix-web"),
            ("HELIX_BROWSER_OIDC_ALGORITHMS", "EdDSA"),
        ],
    )
    .await;
    let o = app.state.services.config.oauth.clone();
    let id = helix_core::service::accounts::LinkIdentity {
        issuer: &o.issuer,
        tenant: "t",
        provider: &o.provider,
        subject: "frank",
    };
    app.state.services.accounts.link_account(&id).await.unwrap();
    let session = app.state.services.accounts.dev_session(&id).await.unwrap();
    let cookie = session.expose();

    for file in ["account-page.json", "agent-access.json", "agent-access-manifest.json", "account-css.json"] {
        let (status, _, body) = invoke_event(&app, file, &[("SESSION_EXAMPLE", cookie)]).await;
        assert_eq!(status, 200, "{file}: {body}");
    }
    let (status, headers, _) = invoke_event(&app, "account-sign-in.json", &[]).await;
    assert_eq!(status, 303);
    assert!(headers["location"].to_str().unwrap().starts_with(&issuer));
    assert!(headers["set-cookie"].to_str().unwrap().contains("; Secure"), "https deployments set Secure");
    let (status, _, body) = invoke_event(&app, "account-callback.json", &[("SIGNIN_EXAMPLE", &"cd".repeat(32))]).await;
    assert_eq!(status, 400, "an unknown state: {body}");
    let (status, _, body) = invoke_event(&app, "account-bindings.json", &[("SESSION_EXAMPLE", cookie)]).await;
    assert_eq!(status, 200, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    let reference = list["bindings"][0]["binding_ref"].as_str().unwrap().to_owned();
    let (status, _, body) = invoke_event(
        &app,
        "account-revoke-form.json",
        &[("SESSION_EXAMPLE", cookie), ("BINDING_REF_EXAMPLE", "unknown")],
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, _, body) = invoke_event(
        &app,
        "account-binding-revoke.json",
        &[("SESSION_EXAMPLE", cookie), ("BINDING_REF_EXAMPLE", &reference)],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, headers, _) = invoke_event(&app, "account-allow-agents.json", &[("SESSION_EXAMPLE", cookie)]).await;
    assert_eq!(status, 303);
    assert!(
        headers["location"].to_str().unwrap().contains("prompt=login"),
        "a step-up asks the provider to re-authenticate"
    );
    let (status, headers, _) = invoke_event(&app, "account-sign-out.json", &[("SESSION_EXAMPLE", cookie)]).await;
    assert_eq!(status, 303);
    assert!(headers["set-cookie"].to_str().unwrap().starts_with("helix_session=;"));
    let (status, _, _) = invoke_event(&app, "account-bindings.json", &[("SESSION_EXAMPLE", cookie)]).await;
    assert_eq!(status, 401, "signed out");
}

#[tokio::test]
async fn the_development_provider_checks_pkce_and_its_codes_are_single_use() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    let callback = browser.through_dev_provider("/account/sign-in", "alice", "tenant-a").await;
    let q = query(&callback);
    let redirect_uri = format!("{}/account/callback", app.base);
    let form = [
        ("grant_type", "authorization_code"),
        ("code", q["code"].as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("client_id", "helix-local-browser"),
        ("code_verifier", "a-verifier-that-does-not-match-the-challenge-0123456789"),
    ];
    let res = app
        .http
        .post(format!("{}/dev-oidc/token", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&form))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(res.json::<Value>().await.unwrap()["error"], "invalid_grant");
    // The code was spent by the failed attempt: the real callback cannot use it.
    let res = browser.get(&callback).await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["details"]["reason"], "code", "{body}");

    // The provider only redirects to the registered callback.
    let res = browser
        .get(concat!(
            "/dev-oidc/authorize?response_type=code&client_id=helix-local-browser",
            "&redirect_uri=https%3A%2F%2Fevil.example%2Fcb&state=s&nonce=n&code_challenge=c&code_challenge_method=S256"
        ))
        .await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_link_and_binding_written_before_accounts_existed_are_repaired_by_the_link_path() {
    use helix_core::store::Item;
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let o = app.state.services.config.oauth.clone();
    let id = helix_core::service::accounts::LinkIdentity {
        issuer: &o.issuer,
        tenant: "t",
        provider: &o.provider,
        subject: "gina",
    };
    // The shapes the earlier link path wrote: a random account id, no account item,
    // a binding without generation or listing entry.
    let link = helix_core::service::records::link_key(&o.provider, "gina");
    let binding = helix_core::service::records::binding_key(&id.hash());
    let store = &app.state.services.store;
    let old = |k: helix_core::store::Key| {
        Item::new(k.pk, k.sk)
            .with_s("account_id", "acct_0123456789ab")
            .with_s("status", "active")
            .with_s("created_at", "2026-01-01T00:00:00+00:00")
    };
    store.put(old(link), None).await.unwrap();
    store.put(old(binding), None).await.unwrap();
    let token = bearer(&app, "gina", "t");
    assert_eq!(
        rest_start(&app, &token, "legacy-before-001").await.0,
        StatusCode::FORBIDDEN,
        "no account item: fail closed"
    );

    app.state.services.accounts.link_account(&id).await.unwrap();
    assert_eq!(rest_start(&app, &token, "legacy-after-0001").await.0, StatusCode::CREATED);
    let mut browser = Browser::new(&app);
    browser.cookies.insert(
        "helix_session".into(),
        app.state.services.accounts.dev_session(&id).await.unwrap().expose().to_owned(),
    );
    let (_, list) = browser.bindings().await;
    assert_eq!(list["bindings"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["bindings"][0]["created_at"], "2026-01-01T00:00:00+00:00");
    let path = format!("/api/account/session/agent-bindings/{}", list["bindings"][0]["binding_ref"].as_str().unwrap());
    assert_eq!(browser.delete(&path, Some(&app.base)).await.status(), StatusCode::OK);
    assert_eq!(rest_start(&app, &token, "legacy-revoked-01").await.0, StatusCode::FORBIDDEN);
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
