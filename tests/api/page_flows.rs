//! The pages' flows over real HTTP: a signed-out visitor of any page is sent to sign in and
//! comes back to that page (never to another site), every form's action opened by `GET`
//! answers a page (a reload or a revisit after the post, never a 405), and the step-up
//! sign-in offers the identity signed in.

use helix_integration_tests::*;
use reqwest::StatusCode;
use serde_json::Value;

use super::account::{Browser, location};

/// Every page that needs a signed-in browser, as a visitor may open it.
const SIGNED_IN_PAGES: [&str; 7] = [
    "/rooms",
    "/chat",
    "/runs",
    "/runs?status=running",
    "/runs/run_somebodys0001",
    "/account/room-connectors",
    "/account/room-sources/claim",
];

/// `s` percent-encoded as a query value.
fn encoded(s: &str) -> String {
    let mut url = reqwest::Url::parse("http://x.invalid/").unwrap();
    url.query_pairs_mut().append_pair("v", s);
    url.query().unwrap().strip_prefix("v=").unwrap().to_owned()
}

#[tokio::test]
async fn a_signed_out_visitor_of_any_page_is_sent_to_sign_in_and_comes_back() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    for page in SIGNED_IN_PAGES {
        let mut browser = Browser::new(&app);
        let res = browser.get(page).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "{page}");
        let sign_in = location(&res);
        assert_eq!(sign_in, format!("/account?return_to={}", encoded(page)), "{page}");
        let res = browser.get(&sign_in).await;
        assert_eq!(res.status(), StatusCode::OK);
        let html = res.text().await.unwrap();
        let hidden = format!("name=\"return_to\" value=\"{}\"", page.replace('&', "&amp;"));
        assert!(html.contains("id=\"sign-in\"") && html.contains(&hidden), "{page}: {html}");
        let callback =
            browser.through_dev_provider_with("/account/sign-in", &[("return_to", page)], "alice", "t").await;
        let res = browser.get(&callback).await;
        assert_eq!((res.status(), location(&res)), (StatusCode::SEE_OTHER, page.to_owned()), "back to {page}");
        let res = browser.get(page).await;
        let expected = if page.starts_with("/runs/") { StatusCode::NOT_FOUND } else { StatusCode::OK };
        assert_eq!(res.status(), expected, "{page} signed in");
    }
    // A sign-in from the account page itself lands there, as before.
    let mut browser = Browser::new(&app);
    let callback = browser.through_dev_provider_with("/account/sign-in", &[], "alice", "t").await;
    assert_eq!(location(&browser.get(&callback).await), "/account");
    // The public pages stay public; JSON routes keep their typed 401.
    let mut browser = Browser::new(&app);
    for public in ["/", "/agent-access", "/account"] {
        assert_eq!(browser.get(public).await.status(), StatusCode::OK, "{public}");
    }
    for json in ["/api/account/runs", "/api/account/session/agent-bindings"] {
        let res = browser.get(json).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{json}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(code(&body), "session_required", "{json}");
    }
}

#[tokio::test]
async fn a_return_path_to_another_site_is_refused() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let attempts = [
        "//evil.example/rooms",
        "https://evil.example/",
        "/\\evil.example",
        "\\\\evil.example",
        "javascript:alert(1)",
        "evil.example",
        "/rooms\r\nSet-Cookie: a=b",
        "",
    ];
    for bad in attempts {
        let mut browser = Browser::new(&app);
        // The sign-in form refuses it: nothing started, no sign-in cookie.
        let res = browser.post("/account/sign-in", &[("return_to", bad)]).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bad:?}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(code(&body), "invalid_request", "{bad:?}");
        assert!(!browser.cookies.contains_key("helix_signin"), "{bad:?}");
        // The sign-in page drops it: that sign-in lands on the account page.
        let html = browser.get(&format!("/account?return_to={}", encoded(bad))).await.text().await.unwrap();
        assert!(html.contains("id=\"sign-in\"") && !html.contains("name=\"return_to\""), "{bad:?}");
        let res = browser.get(&format!("/account/sign-in?return_to={}", encoded(bad))).await;
        assert_eq!((res.status(), location(&res)), (StatusCode::SEE_OTHER, "/account".to_owned()), "{bad:?}");
    }
    let mut browser = Browser::new(&app);
    let res = browser.post("/account/sign-in", &[("return_to", "/rooms"), ("next", "/runs")]).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST, "an unknown field");
    let res = browser.post("/account/sign-in", &[("return_to", "/rooms"), ("return_to", "/runs")]).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST, "two return paths");
}

/// The static `action` of every `method="post"` form of the page templates.
fn form_actions() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/templates");
    let mut actions = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for form in text.split("<form").skip(1) {
            let tag = form.split('>').next().unwrap();
            let Some(action) = tag.split("action=\"").nth(1).and_then(|a| a.split('"').next()) else { continue };
            if tag.contains("method=\"post\"") && !action.contains("{{") && !actions.iter().any(|a| a == action) {
                actions.push(action.to_owned());
            }
        }
    }
    actions.sort();
    actions
}

#[tokio::test]
async fn every_forms_action_opened_by_get_is_a_page_never_a_405() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let actions = form_actions();
    for expected in ["/account/sign-in", "/account/agent-bindings/revoke", "/rooms/invite", "/rooms/members/remove"] {
        assert!(actions.iter().any(|a| a == expected), "{expected} in {actions:?}");
    }
    let mut browser = Browser::new(&app);
    browser.sign_in("alice", "tenant-a").await;
    for action in &actions {
        let res = browser.get(action).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "GET {action}");
        let page = location(&res);
        let res = browser.get(&page).await;
        assert_eq!(res.status(), StatusCode::OK, "GET {action} -> {page}");
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/html"), "{action}");
    }
}

#[tokio::test]
async fn the_step_up_sign_in_offers_the_identity_signed_in() {
    let app = TestApp::spawn_live(Backend::Embedded, &[]).await;
    let mut browser = Browser::new(&app);
    let first = login_page(&mut browser, "/account/sign-in").await;
    assert!(first.contains("value=\"dev-user\"") && first.contains("value=\"dev-tenant\""), "{first}");
    browser.sign_in("carol", "tenant-c").await;
    let step_up = login_page(&mut browser, "/account/allow-agents").await;
    assert!(step_up.contains("value=\"carol\"") && step_up.contains("value=\"tenant-c\""), "{step_up}");
    assert!(!step_up.contains("dev-user"), "{step_up}");
}

/// The development sign-in page a sign-in or step-up form leads to.
async fn login_page(browser: &mut Browser, start: &str) -> String {
    let res = browser.post(start, &[]).await;
    let res = browser.get(&location(&res)).await;
    let authorize = location(&res);
    assert!(authorize.starts_with("/dev-oidc/authorize?"), "{authorize}");
    browser.get(&authorize).await.text().await.unwrap()
}
