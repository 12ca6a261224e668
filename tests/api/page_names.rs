//! The account page says who is signed in by the name their provider gave (the ID token's
//! `name`), kept on the account's profile through the storage kernel: cleaned, bounded,
//! escaped, kept when a later sign-in names no one; the account reference only on request.

use super::account::Browser;
use helix_integration_tests::*;
use reqwest::StatusCode;

on_both_backends!(the_account_page_shows_the_providers_name_and_the_hash_only_on_request);

async fn sign_in_named(browser: &mut Browser, subject: &str, name: &str) {
    let callback =
        browser.through_dev_provider_login("/account/sign-in", &[], subject, "tenant-n", &[("name", name)]).await;
    let res = browser.get(&callback).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER, "{}", res.text().await.unwrap());
}

async fn account_page(browser: &mut Browser) -> String {
    let res = browser.get("/account").await;
    assert_eq!(res.status(), StatusCode::OK);
    res.text().await.unwrap()
}

/// The text of the page's `#display-name` element, as served.
fn shown_name(page: &str) -> &str {
    let start = page.find(r#"<strong id="display-name">"#).expect("a name is shown") + 26;
    &page[start..start + page[start..].find("</strong>").unwrap()]
}

async fn the_account_page_shows_the_providers_name_and_the_hash_only_on_request(backend: Backend) {
    let app = TestApp::spawn_live(backend, &[]).await;
    let mut browser = Browser::new(&app);
    sign_in_named(&mut browser, "ada-subject", "  Ada \t Lovelace ").await;
    let page = account_page(&mut browser).await;
    assert!(page.contains(r#"<strong id="display-name">Ada Lovelace</strong>"#), "{page}");
    assert!(!page.contains("ada-subject"), "the subject is never shown as a name");
    let reference = page.find(r#"id="account-ref""#).expect("the account reference is on the page");
    let details = page.find(r#"<details class="ref-details" id="account-ref-details">"#).expect("in a <details>");
    assert!(details < reference && !page[details..reference].contains("</details>"), "inside the closed <details>");
    assert!(!page[details..details + 60].contains(" open"), "closed: on request");

    // A later sign-in whose token names no one keeps the name; markup in a name is text.
    browser.sign_in("ada-subject", "tenant-n").await;
    assert!(account_page(&mut browser).await.contains(r#"<strong id="display-name">Ada Lovelace</strong>"#));
    sign_in_named(&mut browser, "ada-subject", "<b>Ada</b>\u{7}").await;
    let page = account_page(&mut browser).await;
    let name = shown_name(&page);
    assert!(name.contains("Ada") && !name.contains('<') && !name.contains('\u{7}'), "escaped and clean: {name}");

    // Another person, a long name: cut to 80 characters, never refused.
    let mut other = Browser::new(&app);
    sign_in_named(&mut other, "grace-subject", &"G".repeat(150)).await;
    let page = account_page(&mut other).await;
    assert_eq!(shown_name(&page), "G".repeat(80));
}
