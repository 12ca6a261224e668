//! The development issuer for agents: its key set, and its tokens verified by the
//! resource server through the production JWKS path.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use helix_core::http::dev_auth::{DevAuthKey, JWKS_PATH};
use helix_integration_tests::*;
use serde_json::{Value, json};

fn claims(app: &TestApp) -> Value {
    let o = &app.state.services.config.oauth;
    let now = chrono::Utc::now().timestamp();
    json!({
        "iss": o.issuer, "aud": o.audience, "sub": "alice", "tenant_id": "tenant-a",
        "scope": "helix.agent_runs.read", "iat": now, "exp": now + 600
    })
}

async fn status_with(app: &TestApp, token: &str) -> (u16, Value) {
    let res =
        app.http.get(format!("{}/api/v1/agent-runs/run_abcdefgh12", app.base)).bearer_auth(token).send().await.unwrap();
    read(res).await
}

#[tokio::test]
async fn the_dev_issuer_publishes_one_es256_public_key() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let (status, set) = read(app.http.get(format!("{}{JWKS_PATH}", app.base)).send().await.unwrap()).await;
    assert_eq!(status, 200);
    let keys = set["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!((keys[0]["kty"].as_str(), keys[0]["crv"].as_str()), (Some("EC"), Some("P-256")));
    assert_eq!(keys[0]["alg"], "ES256");
    assert!(keys[0].get("d").is_none(), "no private part");
}

#[tokio::test]
async fn a_dev_issuer_token_verifies_through_the_jwks_path_and_a_tampered_one_is_refused() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    assert!(app.state.services.config.oauth.jwks_url.as_deref().unwrap().ends_with(JWKS_PATH));
    app.token_for("alice", "tenant-a", &[]).await; // links alice (trusted path)
    let token = app.dev_key.sign(&claims(&app));
    let (status, body) = status_with(&app, &token).await;
    assert_eq!(status, 404, "authenticated, then no such run: {body}");

    // The payload changed under the same signature.
    let parts: Vec<&str> = token.split('.').collect();
    let mut forged = claims(&app);
    forged["sub"] = json!("mallory");
    let tampered = format!("{}.{}.{}", parts[0], B64.encode(forged.to_string()), parts[2]);
    // Another key claiming the same kid.
    let other = DevAuthKey::from_pkcs8(&DevAuthKey::generate_pkcs8()).unwrap();
    let header: Value = serde_json::from_slice(&B64.decode(parts[0]).unwrap()).unwrap();
    let other_token = other.sign(&claims(&app));
    let other_parts: Vec<&str> = other_token.split('.').collect();
    let same_kid = format!("{}.{}.{}", B64.encode(header.to_string()), other_parts[1], other_parts[2]);
    for (name, bad) in [("tampered payload", tampered), ("another key", same_kid)] {
        let (status, body) = status_with(&app, &bad).await;
        assert_eq!(status, 401, "{name}");
        assert_eq!(body["error"]["code"], "invalid_token", "{name}");
    }
}

#[tokio::test]
async fn the_dev_issuer_metadata_is_served_at_every_path_clients_probe() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let base = app.base.clone();
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-authorization-server/mcp",
        "/.well-known/openid-configuration",
        "/.well-known/openid-configuration/mcp",
        "/mcp/.well-known/openid-configuration",
    ] {
        let (status, m) = read(app.http.get(format!("{base}{path}")).send().await.unwrap()).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(m["issuer"], base, "{path}");
        for (field, end) in [
            ("authorization_endpoint", "/authorize"),
            ("token_endpoint", "/token"),
            ("registration_endpoint", "/register"),
            ("jwks_uri", JWKS_PATH),
        ] {
            assert_eq!(m[field], format!("{base}{end}"), "{path} {field}");
        }
        assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(m["grant_types_supported"], json!(["authorization_code", "refresh_token"]));
        assert_eq!(m["token_endpoint_auth_methods_supported"], json!(["none"]));
        assert_eq!(m["response_types_supported"], json!(["code"]));
        let scopes: Vec<&str> = m["scopes_supported"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for s in ["offline_access", "helix.agent_runs.read", "helix.rooms.manage"] {
            assert!(scopes.contains(&s), "{path} {s}");
        }
        assert!(m.get("authorization_response_iss_parameter_supported").is_none(), "{path}");
    }
    // The protected resource names this issuer.
    let (_, prm) =
        read(app.http.get(format!("{base}/.well-known/oauth-protected-resource/mcp")).send().await.unwrap()).await;
    assert_eq!(prm["authorization_servers"], json!([base]));
}
