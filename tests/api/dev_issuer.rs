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
async fn the_dev_issuer_publishes_its_es256_access_token_key_and_its_rs256_id_token_key() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let (status, set) = read(app.http.get(format!("{}{JWKS_PATH}", app.base)).send().await.unwrap()).await;
    assert_eq!(status, 200);
    let keys = set["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{set}");
    assert_eq!((keys[0]["kty"].as_str(), keys[0]["crv"].as_str()), (Some("EC"), Some("P-256")));
    assert_eq!(keys[0]["alg"], "ES256");
    assert_eq!(
        (keys[1]["kty"].as_str(), keys[1]["alg"].as_str(), keys[1]["use"].as_str()),
        (Some("RSA"), Some("RS256"), Some("sig"))
    );
    assert_ne!(keys[0]["kid"], keys[1]["kid"]);
    for key in keys {
        for private in ["d", "p", "q", "dp", "dq", "qi"] {
            assert!(key.get(private).is_none(), "no private part: {private}");
        }
    }
    let parsed: Result<openidconnect::core::CoreJsonWebKeySet, _> = serde_json::from_value(set.clone());
    assert!(parsed.is_ok(), "a JWK set the openidconnect crate reads: {parsed:?}");
}

/// OpenID Connect Discovery 1.0 §3, read by a third party's types (the `openidconnect`
/// crate's `CoreProviderMetadata`): the required fields, and RS256 among the ID token
/// algorithms ("The algorithm RS256 MUST be included").
#[tokio::test]
async fn the_openid_configuration_is_a_valid_openid_connect_discovery_document() {
    use openidconnect::core::{CoreJwsSigningAlgorithm, CoreProviderMetadata, CoreSubjectIdentifierType};
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    for path in [
        "/.well-known/openid-configuration",
        "/.well-known/openid-configuration/mcp",
        "/mcp/.well-known/openid-configuration",
    ] {
        let (status, doc) = read(app.http.get(format!("{}{path}", app.base)).send().await.unwrap()).await;
        assert_eq!(status, 200, "{path}");
        let m: CoreProviderMetadata =
            serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{path}: {e}: {doc}"));
        assert_eq!(m.issuer().as_str(), app.base, "{path}");
        assert_eq!(m.jwks_uri().as_str(), format!("{}{JWKS_PATH}", app.base));
        assert!(m.subject_types_supported().contains(&CoreSubjectIdentifierType::Public), "{path}");
        assert!(
            m.id_token_signing_alg_values_supported().contains(&CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256),
            "{path}: RS256 is required: {doc}"
        );
    }
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

async fn register(app: &TestApp, body: Value) -> (u16, Value) {
    read(app.http.post(format!("{}/register", app.base)).json(&body).send().await.unwrap()).await
}

on_both_backends!(public_loopback_clients_register_and_are_kept_in_the_store);
async fn public_loopback_clients_register_and_are_kept_in_the_store(backend: Backend) {
    let app = TestApp::spawn_dev_issuer(backend).await;
    for (name, redirect) in [
        ("Codex", "http://127.0.0.1:49321/callback/abc123"),
        ("Claude Code", "http://localhost:33418/callback"),
        ("Inspector", "http://[::1]:6274/oauth/callback"),
    ] {
        let (status, c) = register(
            &app,
            json!({
                "client_name": name, "redirect_uris": [redirect],
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                "token_endpoint_auth_method": "none", "scope": "helix.agent_runs.read offline_access",
                "client_uri": "https://example.com", "software_id": "ignored"
            }),
        )
        .await;
        assert_eq!(status, 201, "{name}: {c}");
        assert_eq!(c["client_name"], name);
        assert_eq!(c["redirect_uris"], json!([redirect]));
        assert_eq!(c["token_endpoint_auth_method"], "none");
        assert!(c.get("client_secret").is_none(), "public clients get no secret");
        assert!(c.get("client_uri").is_none(), "unknown metadata is ignored, not echoed");
        let id = c["client_id"].as_str().unwrap();
        let stored = helix_core::service::records::oauth_clients::get_client(app.state.services.store.as_ref(), id)
            .await
            .unwrap()
            .expect("the registration is stored");
        assert_eq!(stored.redirect_uris, vec![redirect.to_string()]);
        assert!(stored.expires_at > stored.issued_at, "registrations expire");
    }
    // Without grant_types, the default is authorization_code.
    let (status, c) = register(&app, json!({ "redirect_uris": ["http://127.0.0.1:1/cb"] })).await;
    assert_eq!((status, &c["grant_types"]), (201, &json!(["authorization_code"])));
}

#[tokio::test]
async fn registrations_outside_the_public_loopback_profile_are_typed_rfc7591_errors() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let cases = [
        (json!({ "redirect_uris": ["https://evil.example.com/cb"] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": ["http://example.com:8080/cb"] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": ["http://localhost.evil.com/cb"] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": ["http://127.0.0.1:1/cb#x"] }), "invalid_redirect_uri"),
        (json!({ "redirect_uris": [] }), "invalid_redirect_uri"),
        (json!({ "client_name": "no redirects" }), "invalid_redirect_uri"),
        (
            json!({ "redirect_uris": ["http://127.0.0.1:1/cb"], "token_endpoint_auth_method": "client_secret_basic" }),
            "invalid_client_metadata",
        ),
        (json!({ "redirect_uris": ["http://127.0.0.1:1/cb"], "grant_types": ["implicit"] }), "invalid_client_metadata"),
        (json!({ "redirect_uris": ["http://127.0.0.1:1/cb"], "response_types": ["token"] }), "invalid_client_metadata"),
        (json!({ "redirect_uris": ["http://127.0.0.1:1/cb"], "scope": "admin" }), "invalid_client_metadata"),
        (json!({ "redirect_uris": ["http://127.0.0.1:1/cb"], "client_name": 7 }), "invalid_client_metadata"),
        (json!(["not", "an", "object"]), "invalid_client_metadata"),
    ];
    for (body, code) in cases {
        let (status, e) = register(&app, body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(e["error"], code, "{body}: {e}");
        assert!(e["error_description"].as_str().is_some_and(|d| !d.is_empty()), "{body}");
    }
    let res = app.http.post(format!("{}/register", app.base)).body("{not json").send().await.unwrap();
    let (status, e) = read(res).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_client_metadata")));
}

#[tokio::test]
async fn registrations_are_bounded_per_hour() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let body = json!({ "redirect_uris": ["http://127.0.0.1:1/cb"] });
    let max = helix_core::http::dev_register::MAX_REGISTRATIONS_PER_HOUR;
    let hour = || chrono::Utc::now().timestamp().div_euclid(3600);
    let started = hour();
    let mut accepted = 0;
    for _ in 0..=max {
        let (status, e) = register(&app, body.clone()).await;
        match status {
            201 => accepted += 1,
            400 => assert_eq!(e["error"], "invalid_client_metadata", "{e}"),
            other => panic!("unexpected {other}: {e}"),
        }
    }
    if hour() == started {
        assert_eq!(accepted, max, "the hour's bound holds");
    } // else an hour boundary fell inside the loop and reset the counter: no verdict.
}
