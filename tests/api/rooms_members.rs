//! Members, consent and invites through the `/rooms` page forms (cookie, same-origin), and
//! what the bearer lane sees after each change, on both store backends.

use helix_core::domain::account::PolicyChange;
use helix_integration_tests::support::browser::{between, form_body};
use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::*;
use serde_json::{Value, json};

async fn members_consent_and_invites_take_effect_on_the_next_request(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let bob = app.token_for("bob", "tenant-a", ALL).await;
    let (alice_web, bob_web) = (app.session("alice").await, app.session("bob").await);
    let res = app
        .post("/api/v1/rooms", &alice)
        .header("Idempotency-Key", "members-room-01")
        .json(&json!({"name": "Bench"}))
        .send()
        .await
        .unwrap();
    let room_id = res.json::<Value>().await.unwrap()["room_id"].as_str().unwrap().to_owned();

    // The owner page lists the room and its one member (the owner).
    let page = app.http.get(format!("{}/rooms", app.base)).header("cookie", &alice_web).send().await.unwrap();
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("frame-ancestors 'none'"));
    let html = page.text().await.unwrap();
    assert!(html.contains(&room_id) && html.matches("class=\"member\"").count() == 1, "{html}");

    // A non-owner cannot invite; the owner's invite is shown once and stored hashed.
    assert_eq!(app.form(&bob_web, "/rooms/invite", &[("room_id", &room_id)]).await.0, 404);
    let (status, html) = app.form(&alice_web, "/rooms/invite", &[("room_id", &room_id)]).await;
    assert_eq!(status, 200);
    let code = between(&html, "id=\"invite-code\">", "<").to_owned();
    assert!(code.starts_with("hri_"));
    let again = app.http.get(format!("{}/rooms", app.base)).header("cookie", &alice_web).send().await.unwrap();
    assert!(!again.text().await.unwrap().contains(&code), "shown once");

    // Bob previews (room name, consent version) and accepts exactly that version.
    let (status, html) = app.form(&bob_web, "/rooms/join/preview", &[("code", &code)]).await;
    assert_eq!(status, 200);
    assert_eq!(between(&html, "id=\"join-consent-version\">", "<"), "1");
    assert_eq!(app.form(&bob_web, "/rooms/join", &[("code", &code), ("consent_version", "2")]).await.0, 403);
    assert_eq!(app.form(&bob_web, "/rooms/join", &[("code", &code), ("consent_version", "1")]).await.0, 303);
    let (status, body) = app.form(&bob_web, "/rooms/join", &[("code", &code), ("consent_version", "1")]).await;
    assert_eq!(status, 404, "single use: {body}");
    // A refused form is the page again, with the reason (never a bare JSON document).
    assert!(body.starts_with("<!doctype html>"), "{body}");
    assert_eq!(between(&body, "id=\"rooms-notice\">", "<"), "invite_invalid: the invite code is not valid");

    // Bob's agent now sees the room as a member and may bind its own run to it.
    let (status, list) = read(app.get("/api/v1/rooms", &bob).send().await.unwrap()).await;
    assert_eq!((status, list["rooms"][0]["role"].as_str()), (200, Some("member")));
    assert_eq!(list["rooms"][0]["owned_by_caller"], false);
    let run = app.started(&bob, research_run()).await;
    let bind = |run_id: String| {
        app.post("/api/v1/rooms/run-bindings", &bob).json(&json!({"room_id": room_id, "run_id": run_id})).send()
    };
    assert_eq!(bind(run["run_id"].as_str().unwrap().to_owned()).await.unwrap().status(), 201);

    // Raising the consent version: bob must accept again before binding.
    assert_eq!(
        app.form(&bob_web, "/rooms/consent/raise", &[("room_id", &room_id), ("confirm", "yes")]).await.0,
        404,
        "owner only"
    );
    assert_eq!(app.form(&alice_web, "/rooms/consent/raise", &[("room_id", &room_id), ("confirm", "yes")]).await.0, 303);
    let (_, got) = read(app.get(&format!("/api/v1/rooms/{room_id}"), &bob).send().await.unwrap()).await;
    assert_eq!((got["consent_version"].as_u64(), got["consent_current"].as_bool()), (Some(2), Some(false)));
    let run2 = app.started(&bob, research_run()).await;
    let (status, err) = read(bind(run2["run_id"].as_str().unwrap().to_owned()).await.unwrap()).await;
    assert_eq!((status, err["error"]["code"].as_str()), (403, Some("consent_required")));
    let (_, owner_view) = read(app.get(&format!("/api/v1/rooms/{room_id}"), &alice).send().await.unwrap()).await;
    assert_eq!(owner_view["consent_current"], true, "the owner's raise is its own acceptance");
    assert_eq!(app.form(&bob_web, "/rooms/consent", &[("room_id", &room_id), ("consent_version", "2")]).await.0, 303);
    assert_eq!(bind(run2["run_id"].as_str().unwrap().to_owned()).await.unwrap().status(), 201);
    // The consent receipts are durable, one per accepted version.
    let receipts = app.state.services.store.query(&format!("ROOM#{room_id}"), "CONSENT#", None, 10).await.unwrap();
    assert_eq!(receipts.items.len(), 4, "alice v1, bob v1, alice v2, bob v2");

    // The owner removes bob: his next read no longer finds the room.
    let html = app
        .http
        .get(format!("{}/rooms", app.base))
        .header("cookie", &alice_web)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(html.matches("class=\"member\"").count(), 2);
    let bob_ref = helix_core::domain::account::account_ref(&helix_core::domain::account::account_id_for(
        &app.state.services.config.oauth.provider,
        "bob",
    ));
    assert_eq!(
        app.form(
            &bob_web,
            "/rooms/members/remove",
            &[("room_id", &room_id), ("account_ref", &bob_ref), ("confirm", "yes")]
        )
        .await
        .0,
        404
    );
    // A form's address opened by GET (a reload after the post): the rooms page.
    let no_redirect = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for path in ["/rooms/invite", "/rooms/join/preview", "/rooms/join", "/rooms/members/remove"] {
        let res = no_redirect.get(format!("{}{path}", app.base)).header("cookie", &alice_web).send().await.unwrap();
        assert_eq!((res.status().as_u16(), res.headers()["location"].to_str().unwrap()), (303, "/rooms"), "{path}");
    }
    // Unconfirmed (the page's "I am sure" box left unticked): refused, bob stays.
    let unconfirmed = [("room_id", room_id.as_str()), ("account_ref", bob_ref.as_str())];
    assert_eq!(app.form(&alice_web, "/rooms/members/remove", &unconfirmed).await.0, 400);
    assert_eq!(app.get(&format!("/api/v1/rooms/{room_id}"), &bob).send().await.unwrap().status(), 200);
    let (status, _) = app
        .form(
            &alice_web,
            "/rooms/members/remove",
            &[("room_id", &room_id), ("account_ref", &bob_ref), ("confirm", "yes")],
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(app.get(&format!("/api/v1/rooms/{room_id}"), &bob).send().await.unwrap().status(), 404);
    let (_, list) = read(app.get("/api/v1/rooms", &bob).send().await.unwrap()).await;
    assert_eq!(list["rooms"], json!([]));
}

async fn invites_expire_refuse_guests_and_cross_site_posts(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let alice_web = app.session("alice").await;
    let res = app
        .post("/api/v1/rooms", &alice)
        .header("Idempotency-Key", "members-room-02")
        .json(&json!({"name": "Bench"}))
        .send()
        .await
        .unwrap();
    let room_id = res.json::<Value>().await.unwrap()["room_id"].as_str().unwrap().to_owned();
    let (_, html) = app.form(&alice_web, "/rooms/invite", &[("room_id", &room_id)]).await;
    let code = between(&html, "id=\"invite-code\">", "<").to_owned();
    // Cross-site form posts are refused.
    let res = app
        .http
        .post(format!("{}/rooms/invite", app.base))
        .header("cookie", &alice_web)
        .header("origin", "https://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[("room_id", &room_id)]))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    // A guest cannot join.
    let guest_web = app.session("gary").await;
    app.set_policy("gary", PolicyChange { guest: Some(true), ..Default::default() }).await;
    let (status, body) = app.form(&guest_web, "/rooms/join/preview", &[("code", &code)]).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("id=\"guest-notice\"") && !body.contains("id=\"join-code\""), "the guest's page: {body}");
    // A guest's pairing page says it is not for guests, with no form and no page script.
    let page = app
        .http
        .get(format!("{}/account/room-connectors", app.base))
        .header("cookie", &guest_web)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 403);
    let html = page.text().await.unwrap();
    assert!(html.contains("id=\"guest-notice\"") && !html.contains("<form") && !html.contains("<script"), "{html}");
    // Its forms still refuse a guest, and answer the page with the reason.
    let fields = [("room_id", room_id.as_str()), ("environment_binding_id", "env_0"), ("op", "rotate")];
    let (status, html) = app.form(&guest_web, "/account/room-connectors/credential", &fields).await;
    assert_eq!(status, 403, "{html}");
    assert!(between(&html, "id=\"pairing-notice\">", "<").starts_with("guest_not_allowed: "), "{html}");
    // Expired after seven days.
    app.state.services.clock.advance(7 * 24 * 3600 + 1);
    let bob_web = app.session("bob").await;
    let (status, body) = app.form(&bob_web, "/rooms/join", &[("code", &code), ("consent_version", "1")]).await;
    assert_eq!(status, 404, "{body}");
}

on_both_backends!(
    members_consent_and_invites_take_effect_on_the_next_request,
    invites_expire_refuse_guests_and_cross_site_posts,
);

#[tokio::test]
async fn the_chat_page_runs_only_its_own_script_and_needs_a_member_session() {
    let app = TestApp::spawn().await;
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let res = no_redirects.get(format!("{}/chat", app.base)).send().await.unwrap();
    let csp = res.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe"),
        "{csp}"
    );
    // Signed out: sent to sign in (and back), no script served.
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/account?return_to=%2Fchat");
    assert!(!res.text().await.unwrap().contains("chat.js"), "signed out: no script");
    let cookie = app.session("alice").await;
    let html = app
        .http
        .get(format!("{}/chat", app.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("<script src=\"/chat/static/chat.js\" defer></script>") && html.contains("id=\"attach\""));
    assert!(!html.contains("<script>"), "no inline script");
    let js = app.http.get(format!("{}/chat/static/chat.js", app.base)).send().await.unwrap();
    assert!(js.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    assert!(js.text().await.unwrap().contains("agent-run-observer/bindings"));
    app.set_policy("alice", PolicyChange { guest: Some(true), ..Default::default() }).await;
    let html = app
        .http
        .get(format!("{}/chat", app.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("id=\"guest-notice\"") && !html.contains("chat.js"));
}
