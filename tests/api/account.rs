//! The browser lane over real HTTP: sign-in through the development OpenID provider,
//! sessions, allow agents, binding list and revocation, and what a bearer of the same
//! identity can do before, during and after. The provider's checks (a misbehaving provider
//! for the ID-token checks) are in `account_provider`, the pages in `account_pages`.

use std::collections::HashMap;

use helix_core::domain::account::PolicyChange;
use helix_integration_tests::support::browser::form_body;
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

    pub(crate) async fn delete(&mut self, path: &str, origin: Option<&str>) -> reqwest::Response {
        let mut req = self.http.delete(self.url(path)).header("cookie", self.cookie_header());
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        req.send().await.unwrap()
    }

    pub(crate) async fn bindings(&mut self) -> (StatusCode, Value) {
        let res = self.get("/api/account/session/agent-bindings").await;
        assert_eq!(res.headers()["cache-control"], "no-store");
        (res.status(), res.json().await.unwrap_or(Value::Null))
    }

    /// From a POST that starts an intent through the development provider's login to the
    /// callback URL (not yet followed).
    pub(crate) async fn through_dev_provider(&mut self, start: &str, subject: &str, tenant: &str) -> String {
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
        self.through_dev_provider_login(start, fields, subject, tenant, &[]).await
    }

    /// [`Self::through_dev_provider_with`], the provider's login form also sending `login`
    /// (e.g. the person's `name`).
    pub(crate) async fn through_dev_provider_login(
        &mut self,
        start: &str,
        fields: &[(&str, &str)],
        subject: &str,
        tenant: &str,
        login: &[(&str, &str)],
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
        let mut form: Vec<(&str, &str)> = vec![
            ("client_id", &q["client_id"]),
            ("redirect_uri", &q["redirect_uri"]),
            ("state", &q["state"]),
            ("nonce", &q["nonce"]),
            ("code_challenge", &q["code_challenge"]),
            ("subject", subject),
            ("tenant", tenant),
        ];
        form.extend_from_slice(login);
        let res = self.post("/dev-oidc/authorize", &form).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        location(&res)
    }

    pub(crate) async fn sign_in(&mut self, subject: &str, tenant: &str) {
        let callback = self.through_dev_provider("/account/sign-in", subject, tenant).await;
        let res = self.get(&callback).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "{}", res.text().await.unwrap());
        assert!(self.cookies.contains_key("helix_session"));
    }

    pub(crate) async fn allow_agents(&mut self, subject: &str, tenant: &str) -> reqwest::Response {
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
pub(crate) fn bearer(app: &TestApp, subject: &str, tenant: &str) -> String {
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

pub(crate) async fn rest_start(app: &TestApp, token: &str, key: &str) -> (StatusCode, Value) {
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
