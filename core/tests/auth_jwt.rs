//! Bearer verification against a real JWKS server on loopback, with test-only
//! keys from `tests/fixtures` (generated with openssl; never used anywhere else): the
//! claims each token must carry, the local HS256 path and the bearer header. The key set's
//! fetches, refreshes and outages are in `auth_jwt_key_set`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use helix_core::auth::jwt::{TenantHeaders, TokenVerifier, VerifiedToken, bearer_from_header, mint_local_hs256};
use helix_core::config::Secret;
use helix_core::error::ApiError;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

mod support;

use support::jwt::{
    AUDIENCE, EC_P256, ISSUER, JwksServer, LOCAL_SECRET, NO_HEADERS, RSA_A, RSA_B, TENANT, claims, ec, now, oauth,
    raw_token, reason, rs256, rsa, sign, verifier, with, without,
};

#[tokio::test]
async fn a_valid_rs256_token_is_accepted_with_its_scopes_and_signed_tenant() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let claims = claims();
    let t = v.verify(&rs256(&claims), NO_HEADERS).await.unwrap();
    assert_eq!(
        t,
        VerifiedToken {
            issuer: ISSUER.into(),
            subject: "auth0|user-1".into(),
            tenant: TENANT.into(),
            scopes: vec!["helix.rooms.read".into(), "helix.runs.write".into()],
            expires_at: claims["exp"].as_i64().unwrap(),
        }
    );
}

#[tokio::test]
async fn a_valid_es256_token_is_accepted_with_an_audience_array_and_scp_scopes() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let claims = json!({
        "iss": ISSUER,
        "aud": ["https://other.test.invalid", AUDIENCE],
        "sub": "user-2",
        "org_id": "org-9",
        "scp": ["helix.rooms.read", "helix.rooms.manage"],
        "nbf": now() - 5,
        "exp": now() + 60,
    });
    let t = v.verify(&sign(Algorithm::ES256, "ec-1", &ec(EC_P256), &claims), NO_HEADERS).await.unwrap();
    assert_eq!(t.tenant, "org-9");
    assert_eq!(t.subject, "user-2");
    assert_eq!(t.scopes, vec!["helix.rooms.read", "helix.rooms.manage"]);
}

#[tokio::test]
async fn a_tampered_payload_or_a_foreign_signing_key_fails_as_signature() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let good = rs256(&claims());
    let parts: Vec<&str> = good.split('.').collect();
    let forged_claims = with(claims(), "tenantId", json!("someone-else"));
    let tampered = format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(forged_claims.to_string()), parts[2]);
    assert_eq!(reason(&v, &tampered).await, "signature");
    // Signed by a key the server never published, under a published kid.
    let foreign = sign(Algorithm::RS256, "rsa-a", &rsa(RSA_B), &claims());
    assert_eq!(reason(&v, &foreign).await, "signature");
}

#[tokio::test]
async fn a_token_from_another_issuer_fails_as_issuer() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    for iss in [json!("https://evil.test.invalid/"), json!("https://issuer.test.invalid"), json!([ISSUER]), Value::Null]
    {
        assert_eq!(reason(&v, &rs256(&with(claims(), "iss", iss))).await, "issuer");
    }
    assert_eq!(reason(&v, &rs256(&without(claims(), "iss"))).await, "issuer");
}

#[tokio::test]
async fn a_token_for_another_audience_fails_as_audience() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    for aud in [
        json!("https://api.test.invalid/other"),
        json!(["https://a.test.invalid", "https://b.test.invalid"]),
        json!([]),
        json!(7),
    ] {
        assert_eq!(reason(&v, &rs256(&with(claims(), "aud", aud))).await, "audience");
    }
    assert_eq!(reason(&v, &rs256(&without(claims(), "aud"))).await, "audience");
}

#[tokio::test]
async fn an_expired_token_fails_as_expired_but_small_clock_skew_is_tolerated() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let expired = with(claims(), "exp", json!(now() - 120));
    assert_eq!(reason(&v, &rs256(&expired)).await, "expired");
    let skewed = with(claims(), "exp", json!(now() - 5));
    assert!(v.verify(&rs256(&skewed), NO_HEADERS).await.is_ok());
    assert_eq!(reason(&v, &rs256(&without(claims(), "exp"))).await, "malformed");
    let text = with(claims(), "exp", json!("tomorrow"));
    assert_eq!(reason(&v, &rs256(&text)).await, "malformed");
}

#[tokio::test]
async fn a_token_whose_nbf_is_in_the_future_fails_as_not_yet_valid() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let early = with(claims(), "nbf", json!(now() + 600));
    assert_eq!(reason(&v, &rs256(&early)).await, "not_yet_valid");
    let skewed = with(claims(), "nbf", json!(now() + 5));
    assert!(v.verify(&rs256(&skewed), NO_HEADERS).await.is_ok());
}

#[tokio::test]
async fn a_token_without_a_usable_subject_fails_as_subject() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    assert_eq!(reason(&v, &rs256(&without(claims(), "sub"))).await, "subject");
    for sub in [json!(""), json!(42), json!("x".repeat(257)), json!("a\nb")] {
        assert_eq!(reason(&v, &rs256(&with(claims(), "sub", sub))).await, "subject");
    }
    let longest = with(claims(), "sub", json!("x".repeat(256)));
    assert!(v.verify(&rs256(&longest), NO_HEADERS).await.is_ok());
}

#[tokio::test]
async fn a_token_without_a_single_signed_tenant_fails_as_tenant_claim() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let none = without(claims(), "tenantId");
    assert_eq!(reason(&v, &rs256(&none)).await, "tenant_claim");
    let conflicting = with(claims(), "customer_id", json!("tenant-other"));
    assert_eq!(reason(&v, &rs256(&conflicting)).await, "tenant_claim");
    let empty = with(none.clone(), "tenant_id", json!(""));
    assert_eq!(reason(&v, &rs256(&empty)).await, "tenant_claim");
    let agreeing = with(claims(), "orgId", json!(TENANT));
    assert_eq!(v.verify(&rs256(&agreeing), NO_HEADERS).await.unwrap().tenant, TENANT);
    for name in ["tenantId", "tenant_id", "customerId", "customer_id", "orgId", "org_id"] {
        let one = with(none.clone(), name, json!("t-from-claim"));
        let t = v.verify(&rs256(&one), NO_HEADERS).await.unwrap();
        assert_eq!(t.tenant, "t-from-claim", "{name}");
    }
}

#[tokio::test]
async fn an_hs256_token_fails_as_algorithm_when_the_local_path_is_not_configured() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let secret = Secret::new(LOCAL_SECRET);
    let token = mint_local_hs256(&secret, ISSUER, AUDIENCE, "user-1", TENANT, &[], 300);
    assert_eq!(reason(&v, &token).await, "algorithm");
    // A JWKS that publishes a symmetric key does not open the door either.
    let oct = json!({"kty": "oct", "k": URL_SAFE_NO_PAD.encode(LOCAL_SECRET), "kid": "rsa-a"});
    server.publish(serde_json::from_value(oct).unwrap());
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("rsa-a".into());
    let keyed =
        jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(LOCAL_SECRET.as_bytes()).unwrap()).unwrap();
    assert_eq!(reason(&v, &keyed).await, "algorithm");
    assert_eq!(server.hits(), 0, "rejected before any key lookup");
}

#[tokio::test]
async fn an_unsigned_alg_none_token_fails_as_algorithm() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    for alg in ["none", "None", "HS512", "RSA-OAEP", ""] {
        let token = raw_token(json!({"alg": alg, "kid": "rsa-a"}), &claims(), b"sig");
        assert_eq!(reason(&v, &token).await, "algorithm", "{alg}");
    }
    let unsigned =
        format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims().to_string()));
    assert_eq!(reason(&v, &unsigned).await, "malformed");
}

#[tokio::test]
async fn an_asymmetric_algorithm_outside_the_admitted_list_or_the_key_fails_as_algorithm() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    // PS256 is a fine algorithm for this RSA key, but the config admits RS256 and ES256 only.
    let ps256 = sign(Algorithm::PS256, "rsa-a", &rsa(RSA_A), &claims());
    assert_eq!(reason(&v, &ps256).await, "algorithm");
    // An admitted algorithm pointed at a key of another type.
    let crossed = sign(Algorithm::RS256, "ec-1", &rsa(RSA_A), &claims());
    assert_eq!(reason(&v, &crossed).await, "algorithm");
}

#[tokio::test]
async fn a_matching_tenant_header_is_accepted_and_a_mismatched_one_is_tenant_mismatch() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let token = rs256(&claims());
    let all = TenantHeaders { tenant_id: Some(TENANT), customer_id: Some(TENANT), org_id: Some(TENANT) };
    assert_eq!(v.verify(&token, all).await.unwrap().tenant, TENANT);
    let mismatches = [
        TenantHeaders { tenant_id: Some("tenant-other"), ..NO_HEADERS },
        TenantHeaders { customer_id: Some("tenant-other"), ..NO_HEADERS },
        TenantHeaders { tenant_id: Some(TENANT), org_id: Some("tenant-other"), ..NO_HEADERS },
        TenantHeaders { org_id: Some(""), ..NO_HEADERS },
    ];
    for headers in mismatches {
        assert!(matches!(v.verify(&token, headers).await, Err(ApiError::TenantMismatch)), "{headers:?}");
    }
    // A header never stands in for a missing signed tenant.
    let untenanted = rs256(&without(claims(), "tenantId"));
    let headers = TenantHeaders { tenant_id: Some(TENANT), ..NO_HEADERS };
    assert!(matches!(v.verify(&untenanted, headers).await, Err(ApiError::InvalidToken { reason: "tenant_claim" })));
}

#[tokio::test]
async fn a_locally_minted_hs256_token_round_trips_through_the_verifier() {
    let secret = Secret::new(LOCAL_SECRET);
    let v = TokenVerifier::new(&oauth(None, Some(LOCAL_SECRET)), reqwest::Client::new());
    let scopes = vec!["helix.rooms.read".to_owned(), "helix.rooms.manage".to_owned()];
    let token = mint_local_hs256(&secret, ISSUER, AUDIENCE, "dev-user", "dev-tenant", &scopes, 600);
    let headers = TenantHeaders { tenant_id: Some("dev-tenant"), ..NO_HEADERS };
    let t = v.verify(&token, headers).await.unwrap();
    assert_eq!(t.issuer, ISSUER);
    assert_eq!(t.subject, "dev-user");
    assert_eq!(t.tenant, "dev-tenant");
    assert_eq!(t.scopes, scopes);
    assert!((t.expires_at - now() - 600).abs() <= 5);
    // The local path still enforces every claim rule.
    let expired = mint_local_hs256(&secret, ISSUER, AUDIENCE, "dev-user", "dev-tenant", &scopes, -120);
    assert_eq!(reason(&v, &expired).await, "expired");
    let elsewhere = mint_local_hs256(&secret, "https://other/", AUDIENCE, "dev-user", "t", &[], 60);
    assert_eq!(reason(&v, &elsewhere).await, "issuer");
    // Without a JWKS, an RS256 token has no key to verify against.
    assert_eq!(reason(&v, &rs256(&claims())).await, "unknown_key");
}

#[tokio::test]
async fn an_hs256_token_signed_with_the_wrong_secret_fails_as_signature() {
    let v = TokenVerifier::new(&oauth(None, Some(LOCAL_SECRET)), reqwest::Client::new());
    let wrong = Secret::new("test-only-some-other-secret-9876543210");
    let token = mint_local_hs256(&wrong, ISSUER, AUDIENCE, "dev-user", "dev-tenant", &[], 600);
    assert_eq!(reason(&v, &token).await, "signature");
}

#[tokio::test]
async fn an_oversized_or_malformed_bearer_fails_as_malformed_without_a_fetch() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let padded = with(claims(), "pad", json!("x".repeat(9 * 1024)));
    let oversized = rs256(&padded);
    assert!(oversized.len() > 8 * 1024);
    assert_eq!(reason(&v, &oversized).await, "malformed");
    let good = rs256(&claims());
    for bad in [
        String::new(),
        "not-a-jwt".to_owned(),
        format!("{good}.extra"),
        format!("{good}="),
        format!("{}.{}", URL_SAFE_NO_PAD.encode("[]"), "e30.c2ln"),
        format!("{}.e30.c2ln", URL_SAFE_NO_PAD.encode("not json")),
    ] {
        assert_eq!(reason(&v, &bad).await, "malformed", "{bad}");
    }
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn errors_and_debug_output_never_contain_the_token_or_the_identity() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let token = rs256(&with(claims(), "iss", json!("https://evil.test.invalid/")));
    let err = v.verify(&token, NO_HEADERS).await.unwrap_err();
    let signature = token.rsplit('.').next().unwrap();
    for text in [format!("{err:?}"), err.to_string(), err.body("req-1").to_string()] {
        assert!(!text.contains(signature), "{text}");
        assert!(!text.contains("evil"), "{text}");
    }
    assert_eq!(err.body("req-1")["error"]["details"]["reason"], "issuer");

    let ok = v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    let debug = format!("{ok:?}");
    assert!(!debug.contains("auth0|user-1") && !debug.contains(TENANT), "{debug}");

    let local = TokenVerifier::new(&oauth(None, Some(LOCAL_SECRET)), reqwest::Client::new());
    assert!(!format!("{local:?}").contains(LOCAL_SECRET));
}

#[test]
fn bearer_from_header_takes_a_case_insensitive_scheme_and_a_single_token() {
    let token = rs256(&claims());
    assert_eq!(bearer_from_header(&format!("Bearer {token}")), Some(token.as_str()));
    assert_eq!(bearer_from_header(&format!("bEaReR {token}")), Some(token.as_str()));
    assert_eq!(bearer_from_header(&format!("Bearer {token} {token}")), None);
    assert_eq!(bearer_from_header(&format!("Basic {token}")), None);
    assert_eq!(bearer_from_header("Bearer"), None);
    assert_eq!(bearer_from_header(""), None);
}
