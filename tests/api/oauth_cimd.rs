//! Client ID Metadata Documents at the development issuer, over real HTTP: a client whose
//! `client_id` is the URL of its document served from a loopback server signs in without
//! registering; the document is cached by its HTTP headers; every fetch or validation
//! failure refuses the client.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use helix_integration_tests::support::oauth::{OAuthClient, pkce};
use helix_integration_tests::*;
use serde_json::{Value, json};

const REDIRECT: &str = "http://127.0.0.1:49322/callback/cimd";
const WHO: (&str, &str) = ("carol", "tenant-c");

/// A loopback server of metadata documents that counts its fetches.
#[derive(Clone)]
struct Documents {
    base: String,
    fetches: Arc<AtomicUsize>,
}

async fn document(State(docs): State<Documents>, Path(name): Path<String>) -> Response {
    docs.fetches.fetch_add(1, Ordering::SeqCst);
    let me = format!("{}/{name}", docs.base);
    let doc = |client_id: &str| {
        json!({ "client_id": client_id, "client_name": "CIMD client", "redirect_uris": [REDIRECT],
                "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none" })
        .to_string()
    };
    let json = [("content-type", "application/json")];
    match name.as_str() {
        "cached.json" => ([("cache-control", "max-age=300"), json[0]], doc(&me)).into_response(),
        "fresh.json" => ([("cache-control", "no-store"), json[0]], doc(&me)).into_response(),
        "mismatch.json" => (json, doc(&format!("{}/cached.json", docs.base))).into_response(),
        "large.json" => {
            let mut v: Value = serde_json::from_str(&doc(&me)).unwrap();
            v["padding"] = json!("x".repeat(6 * 1024));
            (json, v.to_string()).into_response()
        }
        "redirect.json" => {
            (http::StatusCode::FOUND, [("location", format!("{}/cached.json", docs.base))]).into_response()
        }
        "secret.json" => {
            let mut v: Value = serde_json::from_str(&doc(&me)).unwrap();
            v["token_endpoint_auth_method"] = json!("client_secret_post");
            (json, v.to_string()).into_response()
        }
        "web.json" => {
            let mut v: Value = serde_json::from_str(&doc(&me)).unwrap();
            v["redirect_uris"] = json!(["https://evil.example/cb"]);
            (json, v.to_string()).into_response()
        }
        "slow.json" => {
            tokio::time::sleep(std::time::Duration::from_secs(8)).await;
            (json, doc(&me)).into_response()
        }
        "html.json" => "<html>not json</html>".into_response(),
        _ => http::StatusCode::NOT_FOUND.into_response(),
    }
}

async fn serve_documents() -> Documents {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let docs = Documents {
        base: format!("http://{}/clients", listener.local_addr().unwrap()),
        fetches: Arc::new(AtomicUsize::new(0)),
    };
    let app = axum::Router::new().route("/clients/{name}", axum::routing::get(document)).with_state(docs.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    docs
}

fn client(app: &TestApp, client_id: &str) -> OAuthClient {
    OAuthClient {
        client_id: client_id.to_owned(),
        redirect_uri: REDIRECT.to_owned(),
        resource: app.state.services.config.resource.clone(),
        authorize: format!("{}/authorize", app.base),
        token: format!("{}/token", app.base),
        http: reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap(),
    }
}

#[tokio::test]
async fn a_client_named_by_its_metadata_document_signs_in_without_registering() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let docs = serve_documents().await;
    let (_, meta) =
        read(app.http.get(format!("{}/.well-known/oauth-authorization-server", app.base)).send().await.unwrap()).await;
    assert_eq!(meta["client_id_metadata_document_supported"], true);
    let url = format!("{}/cached.json", docs.base);
    let c = client(&app, &url);
    let (verifier, challenge) = pkce();
    let q = c.authorize_query("helix.agent_runs.read offline_access", &challenge);
    let back = c.browser(&q, WHO, Some(&["helix.agent_runs.read", "offline_access"])).await;
    let code = back.param("code").unwrap_or_else(|| panic!("{back:?}"));
    let (status, tokens) = c.exchange(&code, &verifier).await;
    assert_eq!(status, 200, "{tokens}");
    let claims: Value = {
        use base64::Engine;
        let part = tokens["access_token"].as_str().unwrap().split('.').nth(1).unwrap().to_owned();
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    };
    assert_eq!(claims["client_id"], url);
    let (status, next) = c.refresh(tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(docs.fetches.load(Ordering::SeqCst), 1, "max-age=300: one fetch for /authorize and /token");
    assert!(
        helix_core::service::records::oauth_clients::get_client(app.state.services.store.as_ref(), &url)
            .await
            .unwrap()
            .is_none()
    );
    // A no-store document is fetched on every use.
    let fresh = client(&app, &format!("{}/fresh.json", docs.base));
    for _ in 0..2 {
        assert_eq!(fresh.get_authorize(&fresh.authorize_query("helix.agent_runs.read", &challenge)).await.status, 200);
    }
    assert_eq!(docs.fetches.load(Ordering::SeqCst), 3, "no-store: fetched again");
}

#[tokio::test]
async fn a_metadata_document_that_cannot_be_fetched_or_does_not_hold_is_refused() {
    let app = TestApp::spawn_dev_issuer(Backend::Embedded).await;
    let docs = serve_documents().await;
    let (_, challenge) = pkce();
    let cases = [
        ("mismatch.json", "client_id is not its URL"),
        ("large.json", "larger than 5 KB"),
        ("redirect.json", "could not be fetched"),
        ("missing.json", "could not be fetched"),
        ("html.json", "not a valid public client"),
        ("secret.json", "not a valid public client"),
        ("web.json", "not a valid public client"),
        ("slow.json", "could not be fetched"),
    ];
    for (name, why) in cases {
        let c = client(&app, &format!("{}/{name}", docs.base));
        let started = std::time::Instant::now();
        let page = c.get_authorize(&c.authorize_query("helix.agent_runs.read", &challenge)).await;
        assert_eq!((page.status, page.location.is_none()), (400, true), "{name}: {page:?}");
        assert!(page.body.contains("data-code=\"invalid_client\""), "{name}: {}", page.body);
        assert!(page.body.contains(why), "{name}: {}", page.body);
        assert!(started.elapsed() < std::time::Duration::from_secs(7), "{name}: within the time limit");
    }
    // URLs that are never fetched.
    let before = docs.fetches.load(Ordering::SeqCst);
    for url in [
        "http://example.com/clients/cached.json".to_owned(),
        format!("{}/cached.json?x=1", docs.base),
        format!("{}/cached.json#f", docs.base),
        docs.base.replace("http://", "http://u:p@") + "/cached.json",
        docs.base.replace("/clients", "/"),
    ] {
        let c = client(&app, &url);
        let page = c.get_authorize(&c.authorize_query("helix.agent_runs.read", &challenge)).await;
        assert_eq!(page.status, 400, "{url}");
        assert!(page.body.contains("not a usable metadata document URL"), "{url}: {}", page.body);
    }
    assert_eq!(docs.fetches.load(Ordering::SeqCst), before, "nothing fetched for a refused URL");
    // Redirect URIs are matched exactly (no loopback port relaxation), on a page.
    let mut c = client(&app, &format!("{}/cached.json", docs.base));
    c.redirect_uri = REDIRECT.replace("49322", "49323");
    let page = c.get_authorize(&c.authorize_query("helix.agent_runs.read", &challenge)).await;
    assert_eq!(page.status, 400);
    assert!(page.body.contains("data-code=\"invalid_redirect_uri\""), "{}", page.body);
    // The token endpoint refuses a document that does not hold.
    let bad = client(&app, &format!("{}/mismatch.json", docs.base));
    let (status, body) = bad.exchange("0123456789abcdef", "v".repeat(43).as_str()).await;
    assert_eq!((status, body["error"].as_str()), (401, Some("invalid_client")), "{body}");
}
