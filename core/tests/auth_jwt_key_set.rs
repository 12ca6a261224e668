//! Bearer verification's key set, against a real JWKS server on loopback: a fetch per
//! unknown kid bounded by the refresh interval, rotation into and out of the set, its TTL,
//! one fetch for concurrent first requests, and a server that is down (verification
//! unavailable, with a backoff between fetches).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use helix_core::auth::jwt::{JwksPolicy, TokenVerifier};
use helix_core::error::ApiError;
use jsonwebtoken::{Algorithm, Header};

mod support;

use support::jwt::{
    JwksServer, NO_HEADERS, RSA_A, RSA_B, TENANT, claims, oauth, public_jwk, reason, rs256, rsa, sign, verifier,
    verifier_with,
};

#[tokio::test]
async fn an_unknown_kid_refetches_the_key_set_once_then_fails_as_unknown_key() {
    let server = JwksServer::standard().await;
    let policy = JwksPolicy { min_refresh_interval: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    assert_eq!(server.hits(), 1);
    let unknown = sign(Algorithm::RS256, "rsa-unknown", &rsa(RSA_A), &claims());
    assert_eq!(reason(&v, &unknown).await, "unknown_key");
    assert_eq!(server.hits(), 2, "exactly one refetch per unknown kid");
    let no_kid = jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims(), &rsa(RSA_A)).unwrap();
    assert_eq!(reason(&v, &no_kid).await, "unknown_key");
    assert_eq!(server.hits(), 2, "a token without kid never refetches");
}

#[tokio::test]
async fn unknown_kids_within_the_refresh_interval_do_not_refetch_the_key_set() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    for i in 0..20 {
        let spam = sign(Algorithm::RS256, &format!("spam-{i}"), &rsa(RSA_A), &claims());
        assert_eq!(reason(&v, &spam).await, "unknown_key");
    }
    assert_eq!(server.hits(), 1);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
}

#[tokio::test]
async fn a_key_rotated_into_the_key_set_is_picked_up_by_the_refresh() {
    let server = JwksServer::standard().await;
    let policy = JwksPolicy { min_refresh_interval: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    let rotated = sign(Algorithm::RS256, "rsa-b", &rsa(RSA_B), &claims());
    assert_eq!(reason(&v, &rotated).await, "unknown_key");
    server.publish(public_jwk(&rsa(RSA_B), Algorithm::RS256, "rsa-b"));
    let t = v.verify(&rotated, NO_HEADERS).await.unwrap();
    assert_eq!(t.tenant, TENANT);
    assert_eq!(server.hits(), 3);
    // Both keys now verify from the cache.
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    v.verify(&rotated, NO_HEADERS).await.unwrap();
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn the_key_set_is_refetched_when_its_ttl_has_passed() {
    let server = JwksServer::standard().await;
    let policy = JwksPolicy { ttl: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_token_verified_earlier_is_refused_once_a_refresh_withdrew_its_key() {
    let server = JwksServer::standard().await;
    let policy = JwksPolicy { min_refresh_interval: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    let token = rs256(&claims());
    v.verify(&token, NO_HEADERS).await.unwrap();
    v.verify(&token, NO_HEADERS).await.unwrap();
    assert_eq!(server.hits(), 1, "the second check is answered from the verified-token cache");
    server.withdraw("rsa-a");
    // Any refresh (here: a token naming a kid the set lacks) replaces the set...
    let rotated = sign(Algorithm::RS256, "rsa-b", &rsa(RSA_B), &claims());
    assert_eq!(reason(&v, &rotated).await, "unknown_key");
    // ...and the cached verification no longer stands without its key.
    assert_eq!(reason(&v, &token).await, "unknown_key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_share_one_key_set_fetch() {
    let server = JwksServer::standard().await;
    let v = Arc::new(verifier(&server));
    let token = Arc::new(rs256(&claims()));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (v, token) = (v.clone(), token.clone());
            tokio::spawn(async move { v.verify(&token, NO_HEADERS).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn a_jwks_server_that_is_down_makes_verification_unavailable() {
    // Nothing listens on a port that was just released.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    drop(listener);
    let v = TokenVerifier::new(&oauth(Some(&url), None), reqwest::Client::new());
    let err = v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap_err();
    assert!(matches!(err, ApiError::Unavailable(_)), "{err:?}");
    assert!(err.retryable());
    assert!(std::error::Error::source(&err).is_some(), "the fetch failure is kept as the source");

    // A server answering 500 is unavailable too, and recovers once it serves keys again.
    let server = JwksServer::standard().await;
    server.state.fail.store(true, Ordering::SeqCst);
    let policy = JwksPolicy { failure_backoff: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    let err = v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap_err();
    assert!(matches!(err, ApiError::Unavailable(_)), "{err:?}");
    let mut chain = String::new();
    let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(&err);
    while let Some(e) = cur {
        chain.push_str(&e.to_string());
        cur = e.source();
    }
    assert!(chain.contains("HTTP 500"), "{chain}");
    server.state.fail.store(false, Ordering::SeqCst);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
}

#[tokio::test]
async fn a_failed_fetch_is_not_retried_by_every_request_during_the_backoff() {
    let server = JwksServer::standard().await;
    server.state.fail.store(true, Ordering::SeqCst);
    let v = verifier(&server);
    for _ in 0..5 {
        let err = v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap_err();
        assert!(matches!(err, ApiError::Unavailable(_)));
    }
    assert_eq!(server.hits(), 1);
}
