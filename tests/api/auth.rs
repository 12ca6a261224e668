//! Bearer verification, principal resolution and scope checks, over HTTP.

use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::*;
use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::{Value, json};

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn hs256(claims: Value) -> String {
    encode(&Header::default(), &claims, &EncodingKey::from_secret(SECRET.as_bytes()).unwrap()).unwrap()
}

fn claims(app: &TestApp) -> Value {
    let o = &app.state.services.config.oauth;
    json!({
        "iss": o.issuer, "aud": o.audience, "sub": "alice", "tenant_id": "tenant-a",
        "scope": "helix.agent_runs.read helix.agent_runs.write", "iat": now(), "exp": now() + 600
    })
}

async fn error_of(res: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = res.status().as_u16();
    let challenge = res.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned());
    (status, challenge, res.json().await.unwrap())
}

#[tokio::test]
async fn a_missing_bearer_is_401_with_resource_metadata() {
    let app = TestApp::spawn().await;
    let res = app.http.get(format!("{}/api/v1/agent-runs/run_abcdefgh12", app.base)).send().await.unwrap();
    let (status, challenge, body) = error_of(res).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge.unwrap(),
        "Bearer resource_metadata=\"http://127.0.0.1:9000/.well-known/oauth-protected-resource/api/v1/agent-runs\""
    );
    assert_eq!(body["error"]["code"], "authentication_required");
}

#[tokio::test]
async fn invalid_expired_and_wrong_audience_tokens_are_401_invalid_token() {
    let app = TestApp::spawn().await;
    app.token().await; // links alice
    let mut expired = claims(&app);
    expired["exp"] = json!(now() - 120);
    let mut audience = claims(&app);
    audience["aud"] = json!("https://someone-else.example");
    let mut issuer = claims(&app);
    issuer["iss"] = json!("https://evil.example");
    let wrong_secret = encode(
        &Header::default(),
        &claims(&app),
        &EncodingKey::from_secret(b"another-secret-another-secret-000").unwrap(),
    )
    .unwrap();
    for (name, token) in [
        ("garbage", "not-a-jwt".to_string()),
        ("expired", hs256(expired)),
        ("audience", hs256(audience)),
        ("issuer", hs256(issuer)),
        ("signature", wrong_secret),
    ] {
        let res = app.get("/api/v1/agent-runs/run_abcdefgh12", &token).send().await.unwrap();
        let (status, challenge, body) = error_of(res).await;
        assert_eq!(status, 401, "{name}");
        assert_eq!(body["error"]["code"], "invalid_token", "{name}");
        assert!(challenge.unwrap().contains("error=\"invalid_token\""), "{name}");
        assert!(!body.to_string().contains(&token), "the token is never echoed");
    }
}

#[tokio::test]
async fn a_tenant_header_must_match_the_signed_tenant() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let path = format!("/api/v1/agent-runs/{}", run["run_id"].as_str().unwrap());
    let ok = app.get(&path, &token).header("X-Tenant-Id", "tenant-a").send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let bad = app.get(&path, &token).header("X-Org-Id", "tenant-b").send().await.unwrap();
    let (status, _, body) = error_of(bad).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "tenant_mismatch");
}

#[tokio::test]
async fn an_unlinked_subject_is_refused_and_nothing_is_created_from_claims() {
    let app = TestApp::spawn().await;
    let token = hs256(claims(&app)); // valid signature, but alice was never linked
    for _ in 0..2 {
        let res = app.get("/api/v1/agent-runs/run_abcdefgh12", &token).send().await.unwrap();
        let (status, _, body) = error_of(res).await;
        assert_eq!(status, 403);
        assert_eq!(body["error"]["code"], "account_not_linked");
    }
}

#[tokio::test]
async fn a_revoked_binding_is_refused() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let o = &app.state.services.config.oauth;
    let id = helix_core::service::accounts::LinkIdentity {
        issuer: &o.issuer,
        tenant: "tenant-a",
        provider: &o.provider,
        subject: "alice",
    };
    app.state.services.accounts.revoke_binding(&id).await.unwrap();
    let res = app.start(&token, "after-revoke-01", research_run()).await;
    let (status, _, body) = error_of(res).await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], "account_not_linked");
    app.state.services.accounts.link_account(&id).await.unwrap();
    let still = app.start(&token, "after-relink-01", research_run()).await;
    assert_eq!(still.status(), 403, "the trusted link path does not reactivate a revoked binding");
}

#[tokio::test]
async fn a_binding_for_another_tenant_does_not_admit() {
    let app = TestApp::spawn().await;
    app.token().await; // alice linked for tenant-a only
    let mut c = claims(&app);
    c["tenant_id"] = json!("tenant-z");
    let res = app.get("/api/v1/agent-runs/run_abcdefgh12", &hs256(c)).send().await.unwrap();
    assert_eq!(res.status(), 403);
}

#[tokio::test]
async fn a_missing_scope_is_403_insufficient_scope_with_challenge() {
    let app = TestApp::spawn().await;
    let reader = app.token_for("alice", "tenant-a", &["helix.agent_runs.read"]).await;
    let res = app.start(&reader, "scope-test-0001", research_run()).await;
    let (status, challenge, body) = error_of(res).await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], "insufficient_scope");
    // One challenge names every scope the start needs, its data scope's included.
    let all = ["helix.agent_runs.write", "helix.data.research_library.read"];
    assert_eq!(body["error"]["details"]["required_scopes"], json!(all));
    let challenge = challenge.unwrap();
    assert!(challenge.contains("error=\"insufficient_scope\""));
    assert!(challenge.contains(&format!("scope=\"{}\"", all.join(" "))), "{challenge}");
    assert!(challenge.contains("resource_metadata=\""));
    let writer = app.token_for("carol", "tenant-a", &["helix.agent_runs.write"]).await;
    let res = app.get("/api/v1/agent-runs/run_abcdefgh12", &writer).send().await.unwrap();
    assert_eq!(res.status(), 403);
}

/// Item 18 (docs/auth.md): another scheme is no bearer at all, so the challenge carries no
/// error code (RFC 6750 3.1); a Bearer whose token is malformed is `invalid_token`.
#[tokio::test]
async fn a_non_bearer_scheme_is_authentication_required_and_a_malformed_bearer_invalid_token() {
    let app = TestApp::spawn().await;
    let url = format!("{}/api/v1/agent-runs/run_abcdefgh12", app.base);
    for value in ["Basic YWxpY2U6c2VjcmV0", "Token abc.def.ghi", "Bearerabc"] {
        let res = app.http.get(&url).header("Authorization", value).send().await.unwrap();
        let (status, challenge, body) = error_of(res).await;
        assert_eq!(status, 401, "{value}");
        assert_eq!(body["error"]["code"], "authentication_required", "{value}");
        assert!(!challenge.unwrap().contains("error="), "{value}");
    }
    for value in ["Bearer", "Bearer a b", "Bearer {not-a-token}"] {
        let res = app.http.get(&url).header("Authorization", value).send().await.unwrap();
        let (status, challenge, body) = error_of(res).await;
        assert_eq!(status, 401, "{value}");
        assert_eq!(body["error"]["code"], "invalid_token", "{value}");
        assert_eq!(body["error"]["details"]["reason"], "malformed", "{value}");
        assert!(challenge.unwrap().contains("error=\"invalid_token\""), "{value}");
    }
}
