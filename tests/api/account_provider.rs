//! The browser lane's identity provider over real HTTP: a misbehaving provider for the
//! ID-token checks, the development provider's PKCE and single-use codes, the link path's
//! one transaction (and its repair of links written before accounts existed), and every
//! account event file through the Lambda adapter.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use helix_core::http::dev_oidc::DevSigner;
use helix_integration_tests::support::browser::form_body;
use helix_integration_tests::support::events::{event_text, through_adapter};
use helix_integration_tests::support::faults::FaultPoint;
use helix_integration_tests::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::account::{Browser, bearer, location, query, rest_start};

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
    let provider: &[(&str, &str)] = &[
        ("HELIX_BROWSER_DEV_PROVIDER", "0"),
        ("HELIX_BROWSER_OIDC_ISSUER", &issuer),
        ("HELIX_BROWSER_OIDC_CLIENT_ID", "helix-web"),
        ("HELIX_BROWSER_OIDC_ALGORITHMS", "EdDSA"),
    ];
    let app = TestApp::spawn_with(Backend::Embedded, &[EVENTS_HOST, provider].concat()).await;
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
