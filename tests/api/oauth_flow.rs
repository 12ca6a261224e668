//! An MCP client connecting by OAuth to the development issuer, over real HTTP: discovery,
//! registration, the browser's sign-in and consent, codes, tokens verified through the
//! JWKS path, refresh rotation and family revocation, and every refusal on the way.

use helix_core::service::records::oauth_grants::get_pending;
use helix_integration_tests::support::oauth::{OAuthClient, input_value, pkce};
use helix_integration_tests::*;
use serde_json::{Value, json};

on_both_backends!(
    an_mcp_client_connects_by_oauth_and_refreshes_with_rotation,
    the_issuers_state_survives_a_restart,
    step_up_a_token_without_rooms_manage_is_refused_until_reauthorized,
    an_anonymous_authorize_keeps_nothing_in_the_store,
);

/// A changed token-request field: (name, value).
type Change<'a> = Vec<(&'a str, &'a str)>;

const REDIRECT: &str = "http://127.0.0.1:49321/callback/abc";
const WHO: (&str, &str) = ("alice", "tenant-a");

async fn tools_call(app: &TestApp, token: &str, name: &str, arguments: Value) -> Value {
    let (status, body) = app.rpc("/mcp", token, "tools/call", json!({ "name": name, "arguments": arguments })).await;
    assert_eq!(status, 200, "{body}");
    body["result"].clone()
}

fn claims(jwt: &str) -> Value {
    use base64::Engine;
    let part = jwt.split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

async fn an_mcp_client_connects_by_oauth_and_refreshes_with_rotation(backend: Backend) {
    let app = TestApp::spawn_dev_issuer(backend).await;
    let client = app.oauth_client(REDIRECT).await;
    let scopes = ["helix.agent_runs.read", "helix.rooms.read", "offline_access"];
    let tokens = client.authorize_all(WHO, &scopes).await;
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(tokens["token_type"], "Bearer");
    let c = claims(access);
    assert_eq!((c["iss"].as_str(), c["aud"].as_str()), (Some(app.base.as_str()), Some(client.resource.as_str())));
    assert_eq!((c["sub"].as_str(), c["tenant_id"].as_str()), (Some("alice"), Some("tenant-a")));
    assert_eq!(c["client_id"], client.client_id.as_str());
    assert_eq!(c["scope"], scopes.join(" "));
    assert!(c["jti"].is_string() && c["exp"].as_i64().unwrap() > c["iat"].as_i64().unwrap());
    let header: Value = {
        use base64::Engine;
        let h = access.split('.').next().unwrap();
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(h).unwrap()).unwrap()
    };
    assert_eq!(header["alg"], "ES256", "verified through the JWKS path, not HS256");

    // The resource server takes it: tools/list, then a tool call.
    let (status, listed) = app.rpc("/mcp", access, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    assert!(listed["result"]["tools"].as_array().unwrap().len() > 3);
    let rooms = tools_call(&app, access, "helix_room_list", json!({})).await;
    assert_eq!(rooms["isError"], false, "{rooms}");

    // Refresh rotates; the rotated token again ends the whole family.
    let first = tokens["refresh_token"].as_str().unwrap().to_owned();
    let (status, next) = client.refresh(&first).await;
    assert_eq!(status, 200, "{next}");
    let second = next["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(first, second, "rotated");
    let (_, listed) = app.rpc("/mcp", next["access_token"].as_str().unwrap(), "tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let (status, reused) = client.refresh(&first).await;
    assert_eq!((status, reused["error"].as_str()), (400, Some("invalid_grant")), "{reused}");
    let (status, after) = client.refresh(&second).await;
    assert_eq!((status, after["error"].as_str()), (400, Some("invalid_grant")), "the family is revoked: {after}");
}

#[tokio::test]
async fn without_offline_access_there_is_no_refresh_token_and_codes_are_single_use() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let client = app.oauth_client(REDIRECT).await;
    let (verifier, challenge) = pkce();
    let back = client
        .browser(&client.authorize_query("helix.agent_runs.read", &challenge), WHO, Some(&["helix.agent_runs.read"]))
        .await;
    let code = back.param("code").unwrap();
    let (status, tokens) = client.exchange(&code, &verifier).await;
    assert_eq!(status, 200, "{tokens}");
    assert!(tokens.get("refresh_token").is_none());
    let (status, again) = client.exchange(&code, &verifier).await;
    assert_eq!((status, again["error"].as_str()), (400, Some("invalid_grant")), "code reuse: {again}");
}

async fn code_for(client: &OAuthClient, challenge: &str) -> String {
    let back = client
        .browser(&client.authorize_query("helix.agent_runs.read", challenge), WHO, Some(&["helix.agent_runs.read"]))
        .await;
    back.param("code").unwrap_or_else(|| panic!("{back:?}"))
}

#[tokio::test]
async fn the_token_endpoint_checks_verifier_redirect_client_and_resource() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let client = app.oauth_client(REDIRECT).await;
    let (verifier, challenge) = pkce();
    let other_redirect = "http://127.0.0.1:49321/callback/other";
    let (wrong_verifier, _) = pkce();
    let cases: [(&str, Change, &str); 5] = [
        ("wrong verifier", vec![("code_verifier", &wrong_verifier)], "invalid_grant"),
        ("wrong redirect", vec![("redirect_uri", other_redirect)], "invalid_grant"),
        ("other resource", vec![("resource", "https://elsewhere.example/mcp")], "invalid_target"),
        ("unknown client", vec![("client_id", "dyn_nobody")], "invalid_client"),
        ("grant type", vec![("grant_type", "password")], "unsupported_grant_type"),
    ];
    for (name, change, error) in cases {
        let code = code_for(&client, &challenge).await;
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", &verifier),
            ("client_id", &client.client_id),
            ("redirect_uri", &client.redirect_uri),
            ("resource", &client.resource),
        ];
        for (k, v) in &change {
            form.retain(|(n, _)| n != k);
            form.push((k, v));
        }
        let (status, body, cache) = client.token_request(&form).await;
        assert_eq!(body["error"], error, "{name}: {body}");
        assert!(status == 400 || status == 401, "{name}: {status}");
        assert_eq!(cache.as_deref(), Some("no-store"), "{name}");
    }
    let (status, body, _) = client.token_request(&[("grant_type", "authorization_code")]).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_request")));
}

#[tokio::test]
async fn authorize_refuses_on_a_page_until_the_redirect_is_trusted_then_at_the_redirect() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let client = app.oauth_client(REDIRECT).await;
    let (_, challenge) = pkce();
    let base = client.authorize_query("helix.agent_runs.read", &challenge);
    let with = |changes: &[(&str, &str)]| {
        let mut q = base.clone();
        for (k, v) in changes {
            q.retain(|(n, _)| n != k);
            if !v.is_empty() {
                q.push((k.to_string(), v.to_string()));
            }
        }
        q
    };
    // A page, never a redirect to an unverified URI.
    for (name, q, code) in [
        (
            "unregistered redirect",
            with(&[("redirect_uri", "http://127.0.0.1:49321/elsewhere")]),
            "invalid_redirect_uri",
        ),
        ("non-loopback redirect", with(&[("redirect_uri", "https://evil.example/cb")]), "invalid_redirect_uri"),
        ("unknown client", with(&[("client_id", "dyn_nobody")]), "invalid_client"),
    ] {
        let page = client.get_authorize(&q).await;
        assert_eq!((page.status, page.location.is_none()), (400, true), "{name}");
        assert!(page.body.contains(&format!("data-code=\"{code}\"")), "{name}: {}", page.body);
    }
    // The loopback port is relaxed (RFC 8252 §7.3).
    let page = client.get_authorize(&with(&[("redirect_uri", "http://127.0.0.1:50001/callback/abc")])).await;
    assert_eq!(page.status, 200, "another port: {page:?}");
    // Back at the redirect, with the state.
    for (name, q, error) in [
        ("plain PKCE", with(&[("code_challenge_method", "plain")]), "invalid_request"),
        ("no PKCE", with(&[("code_challenge_method", ""), ("code_challenge", "")]), "invalid_request"),
        ("other resource", with(&[("resource", "https://elsewhere.example/mcp")]), "invalid_target"),
        ("unknown scope", with(&[("scope", "helix.agent_runs.read admin")]), "invalid_scope"),
        ("response type", with(&[("response_type", "token")]), "unsupported_response_type"),
    ] {
        let back = client.get_authorize(&q).await;
        assert_eq!(back.status, 303, "{name}: {back:?}");
        assert!(back.location.as_ref().unwrap().as_str().starts_with(REDIRECT), "{name}");
        assert_eq!(
            (back.param("error").as_deref(), back.param("state").as_deref()),
            (Some(error), Some("st-1")),
            "{name}"
        );
    }
    let mut two = base.clone();
    two.retain(|(n, _)| n != "resource");
    two.push(("resource".into(), client.resource.clone()));
    two.push(("resource".into(), "https://elsewhere.example/mcp".into()));
    assert_eq!(client.get_authorize(&two).await.param("error").as_deref(), Some("invalid_target"));
    let back = client.get_authorize(&with(&[("state", "")])).await;
    assert_eq!((back.status, back.param("error").as_deref()), (303, Some("invalid_request")), "state is required");
}

#[tokio::test]
async fn deny_returns_access_denied_and_cross_site_posts_are_refused() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let client = app.oauth_client(REDIRECT).await;
    let (_, challenge) = pkce();
    let q = client.authorize_query("helix.agent_runs.read", &challenge);
    let back = client.browser(&q, WHO, None).await;
    assert_eq!(back.status, 303);
    assert_eq!((back.param("error").as_deref(), back.param("state").as_deref()), (Some("access_denied"), Some("st-1")));
    assert!(back.param("code").is_none());

    let page = client.get_authorize(&q).await;
    let pending = helix_integration_tests::support::oauth::input_value(&page.body, "pending").unwrap();
    let form = [("pending", pending.as_str()), ("subject", "alice"), ("tenant", "tenant-a")];
    let res = client.post_form(&client.authorize, &form).header("Origin", "http://evil.example").send().await.unwrap();
    assert_eq!(res.status(), 403, "cross-site sign-in");
    // A decision without the session that signed in is refused.
    let decide = [("pending", pending.as_str()), ("scope", "helix.agent_runs.read"), ("decision", "approve")];
    let origin = app.base.clone();
    let res = client.post_form(&client.authorize, &decide).header("Origin", &origin).send().await.unwrap();
    assert!(res.headers().get("location").is_none() && res.status().is_client_error(), "{}", res.status());
}

#[tokio::test]
async fn approving_allows_agents_for_exactly_that_identity() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let client = app.oauth_client(REDIRECT).await;
    let tokens = client.authorize_all(("bob", "tenant-b"), &["helix.agent_runs.read"]).await;
    let access = tokens["access_token"].as_str().unwrap();
    // bob never ran `helix dev-token`: the approval made his account and binding.
    let res = app.get("/api/v1/agent-runs/run_abcdefgh12", access).send().await.unwrap();
    assert_eq!(res.status(), 404, "authenticated and bound, then no such run");
    let o = &app.state.services.config.oauth;
    let id = helix_core::service::accounts::LinkIdentity {
        issuer: &o.issuer,
        tenant: "tenant-b",
        provider: &o.provider,
        subject: "bob",
    };
    app.state.services.accounts.revoke_binding(&id).await.unwrap();
    let res = app.get("/api/v1/agent-runs/run_abcdefgh12", access).send().await.unwrap();
    assert_eq!(res.status(), 403, "a revoked binding refuses the token");
}

async fn the_issuers_state_survives_a_restart(backend: Backend) {
    let app = TestApp::spawn_dev_issuer(backend).await;
    let client = app.oauth_client(REDIRECT).await;
    let (verifier, challenge) = pkce();
    let q = client.authorize_query("helix.agent_runs.read offline_access", &challenge);
    let back = client.browser(&q, WHO, Some(&["helix.agent_runs.read", "offline_access"])).await;
    let code = back.param("code").unwrap();
    // A second server over the same store and key: the code and then the family are there.
    let again = app.restarted().await;
    let client2 = OAuthClient {
        authorize: client.authorize.replace(&app.base, &again.base),
        token: client.token.replace(&app.base, &again.base),
        resource: client.resource.clone(),
        client_id: client.client_id.clone(),
        redirect_uri: client.redirect_uri.clone(),
        http: client.http.clone(),
    };
    let (status, tokens) = client2.exchange(&code, &verifier).await;
    assert_eq!(status, 200, "{tokens}");
    let (status, next) = client2.refresh(tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(status, 200, "{next}");
}

async fn step_up_a_token_without_rooms_manage_is_refused_until_reauthorized(backend: Backend) {
    let app = TestApp::spawn_dev_issuer(backend).await;
    let client = app.oauth_client(REDIRECT).await;
    let tokens = client.authorize_all(WHO, &["helix.rooms.read"]).await;
    let access = tokens["access_token"].as_str().unwrap();
    let args = json!({ "idempotency_key": "oauth-room-create-1", "request": { "name": "Bench" } });
    let refused = tools_call(&app, access, "helix_room_create", args.clone()).await;
    assert_eq!(refused["isError"], true);
    assert_eq!(refused["structuredContent"]["error"]["code"], "insufficient_scope", "{refused}");
    let challenge = refused["_meta"]["mcp/www_authenticate"][0].as_str().unwrap();
    assert!(challenge.contains("insufficient_scope") && challenge.contains("helix.rooms.manage"), "{challenge}");
    let res = app
        .post("/api/v1/rooms", access)
        .json(&args["request"])
        .header("Idempotency-Key", "oauth-room-rest-1")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let header = res.headers()["www-authenticate"].to_str().unwrap();
    assert!(header.contains("insufficient_scope") && header.contains("helix.rooms.manage"), "{header}");
    // The client asks again with the scope the challenge named.
    let tokens = client.authorize_all(WHO, &["helix.rooms.read", "helix.rooms.manage"]).await;
    let created = tools_call(&app, tokens["access_token"].as_str().unwrap(), "helix_room_create", args).await;
    assert_eq!(created["isError"], false, "{created}");
}

#[tokio::test]
async fn unticking_a_scope_leaves_it_out_of_the_token() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let client = app.oauth_client(REDIRECT).await;
    let (verifier, challenge) = pkce();
    let q = client.authorize_query("helix.rooms.read helix.rooms.manage", &challenge);
    let back = client.browser(&q, WHO, Some(&["helix.rooms.read"])).await;
    let (_, tokens) = client.exchange(&back.param("code").unwrap(), &verifier).await;
    assert_eq!(claims(tokens["access_token"].as_str().unwrap())["scope"], "helix.rooms.read");
}

#[tokio::test]
async fn people_and_agents_sign_in_at_one_issuer_with_one_key_set() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let config = &app.state.services.config;
    let browser = config.browser.oidc.as_ref().unwrap();
    assert_eq!(browser.issuer, app.base, "the browser's sign-in is the development issuer");
    assert_eq!(config.oauth.issuer, app.base, "and agents' tokens are expected from it");
    assert_eq!(browser.algorithms, vec!["RS256".to_owned()], "ID tokens: RS256, as OpenID requires");
    let (_, meta) =
        read(app.http.get(format!("{}/.well-known/openid-configuration", app.base)).send().await.unwrap()).await;
    assert_eq!(meta["issuer"], app.base);
    assert_eq!(meta["id_token_signing_alg_values_supported"], json!(["RS256"]));
    assert_eq!(meta["jwks_uri"], format!("{}{}", app.base, helix_core::http::dev_auth::JWKS_PATH));
    // The browser client's authorization request goes to the sign-in page, not to consent.
    let client = app.oauth_client(REDIRECT).await;
    let q = "response_type=code&client_id=helix-local-browser&state=s&nonce=n&code_challenge_method=S256";
    let res = client.http.get(format!("{}?{q}", client.authorize)).send().await.unwrap();
    assert_eq!(res.status(), 303);
    assert!(res.headers()["location"].to_str().unwrap().starts_with("/dev-oidc/authorize?"));
}

/// `GET /authorize` answers the sign-in page with the request sealed into the form: nothing
/// is kept until a person signs in, so anonymous requests cannot grow the store.
async fn an_anonymous_authorize_keeps_nothing_in_the_store(backend: Backend) {
    let app = TestApp::spawn_dev_issuer(backend).await;
    let client = app.oauth_client(REDIRECT).await;
    let (_, challenge) = pkce();
    let q = client.authorize_query("helix.agent_runs.read", &challenge);
    let store = app.state.services.store.as_ref();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..20 {
        let page = client.get_authorize(&q).await;
        assert_eq!(page.status, 200, "{page:?}");
        let pending = input_value(&page.body, "pending").expect("the sealed request");
        assert!(get_pending(store, &pending).await.unwrap().is_none(), "nothing stored before the sign-in");
        assert!(seen.insert(pending), "each request its own value");
    }
    // An altered or made-up value is refused at the sign-in, with nothing written.
    let sealed = seen.into_iter().next().unwrap();
    let (body, tag) = sealed.split_once('.').unwrap();
    let altered = format!("{}x.{tag}", &body[..body.len() - 1]);
    for bad in [altered.as_str(), "0123456789abcdef0123456789abcdef"] {
        let form = [("pending", bad), ("subject", WHO.0), ("tenant", WHO.1)];
        let res = client.post_form(&client.authorize, &form).header("Origin", app.base.clone()).send().await.unwrap();
        assert_eq!(res.status(), 400, "{bad}");
        assert!(res.headers().get("set-cookie").is_none(), "no sign-in for {bad}");
        assert!(get_pending(store, bad).await.unwrap().is_none());
    }
    // The sealed request still leads through sign-in and consent to a code.
    let back = client.browser(&q, WHO, Some(&["helix.agent_runs.read"])).await;
    assert!(back.param("code").is_some(), "{back:?}");
}
