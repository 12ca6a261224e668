//! Regressions in the smaller lanes over real HTTP: a withdrawn chat binding, rejoining a
//! room, sliding a short session, an escaped observer snapshot, silent sockets at the
//! connection cap, and `TRUST_PROXY=hops:N`.

use std::time::{Duration, Instant};

use helix_integration_tests::support::browser::between;
use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::support::runs::{completing_step, research_run};
use helix_integration_tests::*;
use serde_json::{Value, json};

const OBSERVERS: &str = "/api/agi/agent-run-observer/bindings";

async fn observe_raw(app: &TestApp, cookie: &str, body: String) -> (u16, Value) {
    let req = app.browser(reqwest::Method::POST, OBSERVERS, cookie).header("content-type", "application/json");
    read(req.body(body).send().await.unwrap()).await
}

async fn get_browser(app: &TestApp, cookie: &str, path: &str) -> (u16, Value) {
    read(app.browser(reqwest::Method::GET, path, cookie).send().await.unwrap()).await
}

async fn a_withdrawn_chat_binding_shows_nothing_more_of_the_run(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let (_, obs) = observe_raw(&app, &cookie, json!({ "chat_id": "c1" }).to_string()).await;
    let run = app.started(&alice, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    let claimed = app
        .post("/api/v1/rooms/chat-bindings/claim", &alice)
        .json(&json!({ "claim_handle": obs["claim_handle"], "run_id": run_id }))
        .send()
        .await
        .unwrap();
    let (status, receipt) = read(claimed).await;
    assert_eq!(status, 201, "{receipt}");
    let path = format!("{OBSERVERS}/{}", obs["observer_binding_ref"].as_str().unwrap());
    let (_, bound) = get_browser(&app, &cookie, &path).await;
    assert_eq!(
        (bound["binding_status"].as_str(), bound["lifecycle_status"].as_str()),
        (Some("bound"), Some("waiting"))
    );

    let withdraw = format!("{}/api/v1/rooms/chat-bindings/{}", app.base, receipt["binding_ref"].as_str().unwrap());
    assert_eq!(app.http.delete(withdraw).bearer_auth(&alice).send().await.unwrap().status(), 200);
    let (_, view) = get_browser(&app, &cookie, &path).await;
    assert_eq!(view["binding_status"], "revoked");
    assert!(view["lifecycle_status"].is_null() && view["completion_status"].is_null(), "no run status: {view}");

    // The run completes with an authorized terminal product: the withdrawn chat never sees it.
    app.script(completing_step(1));
    let done = app.continue_run(&alice, run_id, "withdrawn-01", json!({ "expected_version": 1, "instruction": "go" }));
    let done: Value = done.await.json().await.unwrap();
    assert_eq!(done["terminal_authority_status"], "authorized", "{done}");
    let (status, view) = get_browser(&app, &cookie, &path).await;
    assert_eq!(status, 200);
    assert!(view["terminal_message"].is_null(), "no terminal message after withdrawal: {view}");
    assert!(view["lifecycle_status"].is_null() && view["completion_status"].is_null(), "{view}");
    let (_, page) = get_browser(&app, &cookie, &format!("{path}/events")).await;
    assert_eq!(page["receipts"], json!([]));
}

async fn a_removed_member_rejoins_at_the_same_consent_version(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (alice, bob) = (app.token_for("alice", "tenant-a", ALL).await, app.token_for("bob", "tenant-a", ALL).await);
    let (alice_web, bob_web) = (app.session("alice").await, app.session("bob").await);
    let res =
        app.post("/api/v1/rooms", &alice).header("Idempotency-Key", "rejoin-room-01").json(&json!({"name": "Bench"}));
    let room_id = res.send().await.unwrap().json::<Value>().await.unwrap()["room_id"].as_str().unwrap().to_owned();
    let join = async |code: &str| app.form(&bob_web, "/rooms/join", &[("code", code), ("consent_version", "1")]).await;
    let invite = async || {
        let (_, html) = app.form(&alice_web, "/rooms/invite", &[("room_id", &room_id)]).await;
        between(&html, "id=\"invite-code\">", "<").to_owned()
    };
    assert_eq!(join(&invite().await).await.0, 303);
    let bob_ref = helix_core::domain::account::account_ref(&helix_core::domain::account::account_id_for(
        &app.state.services.config.oauth.provider,
        "bob",
    ));
    let remove = [("room_id", room_id.as_str()), ("account_ref", bob_ref.as_str()), ("confirm", "yes")];
    assert_eq!(app.form(&alice_web, "/rooms/members/remove", &remove).await.0, 303);
    assert_eq!(app.get(&format!("/api/v1/rooms/{room_id}"), &bob).send().await.unwrap().status(), 404);

    // Invited again at the same consent version, bob is a member again.
    let (status, body) = join(&invite().await).await;
    assert_eq!(status, 303, "rejoin: {body}");
    let (status, room) = read(app.get(&format!("/api/v1/rooms/{room_id}"), &bob).send().await.unwrap()).await;
    assert_eq!((status, room["role"].as_str()), (200, Some("member")), "{room}");
    let run = app.started(&bob, research_run()).await;
    let bind = app.post("/api/v1/rooms/run-bindings", &bob).json(&json!({"room_id": room_id, "run_id": run["run_id"]}));
    assert_eq!(bind.send().await.unwrap().status(), 201, "the rejoined member's consent is current");
}

async fn a_session_in_constant_use_outlives_a_short_idle_timeout(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[("HELIX_BROWSER_SESSION_IDLE_SECONDS", "120")]).await;
    let cookie = app.session("alice").await;
    let path = format!("{OBSERVERS}/obs_{}", "0".repeat(24));
    // Used every 70 s (more often than the 120 s idle timeout) for ten minutes.
    for minute in 0..9 {
        app.state.services.clock.advance(70);
        assert_eq!(get_browser(&app, &cookie, &path).await.0, 404, "still signed in after use {minute}");
    }
    app.state.services.clock.advance(121);
    assert_eq!(get_browser(&app, &cookie, &path).await.0, 401, "an unused session still expires");
}

/// `{"chat_id":"c1","snapshot":[...]}` with `messages` messages of `chars` emoji each, every
/// one written as its JSON surrogate-pair escape (12 bytes for one character).
fn escaped_snapshot(messages: usize, chars: usize) -> String {
    let content = "\\ud83d\\ude00".repeat(chars);
    let msgs: Vec<String> = (0..messages).map(|_| format!(r#"{{"role":"user","content":"{content}"}}"#)).collect();
    format!(r#"{{"chat_id":"c1","snapshot":[{}]}}"#, msgs.join(","))
}

async fn an_escaped_snapshot_is_sized_by_its_decoded_bounds(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let cookie = app.session("alice").await;
    let full = escaped_snapshot(12, 1000);
    assert!(full.len() > 140_000, "well over 64 KiB on the wire");
    let (status, created) = observe_raw(&app, &cookie, full).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        (created["snapshot_message_count"].as_u64(), created["snapshot_redacted"].as_bool()),
        (Some(12), Some(false))
    );
    let obs_ref = created["observer_binding_ref"].as_str().unwrap();
    let key = helix_core::service::records::rooms::snapshot_key(obs_ref);
    let stored = app.state.services.store.get(&key).await.unwrap().unwrap();
    assert!(stored.s("body").unwrap().contains(&"😀".repeat(1000)), "stored decoded");

    // Over the decoded bounds: refused by them, not by the body limit.
    let (status, err) = observe_raw(&app, &cookie, escaped_snapshot(12, 1001)).await;
    assert_eq!((status, code(&err)), (400, "invalid_request"), "{err}");
    // A body beyond what any valid snapshot needs is still too large.
    let padded = format!("{}{}", " ".repeat(helix_core::domain::room::OBSERVER_BODY_MAX_BYTES), escaped_snapshot(1, 1));
    let (status, err) = observe_raw(&app, &cookie, padded).await;
    assert_eq!((status, code(&err)), (413, "payload_too_large"), "{err}");
}

on_both_backends!(
    a_withdrawn_chat_binding_shows_nothing_more_of_the_run,
    a_removed_member_rejoins_at_the_same_consent_version,
    a_session_in_constant_use_outlives_a_short_idle_timeout,
    an_escaped_snapshot_is_sized_by_its_decoded_bounds,
);

#[tokio::test]
async fn thirty_two_silent_sockets_do_not_delay_a_real_request() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_SERVE_MAX_CONNECTIONS", "32")]).await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut silent = vec![];
    for _ in 0..40 {
        silent.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let request = "GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let answer = raw_exchange(&app.base, request.as_bytes(), Duration::from_secs(15)).await;
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The header timeout (10 s) is what a silent socket could hold a slot for.
    assert!(took < Duration::from_secs(2), "served in {took:?} despite 40 silent sockets");
    drop(silent);
}

#[tokio::test]
async fn trust_proxy_hops_believe_the_nth_forwarded_entry_and_nothing_shorter() {
    let discovery = |xfp: &str| {
        format!(
            "GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: api.example.com\r\n\
             X-Forwarded-Proto: {xfp}\r\nConnection: close\r\n\r\n"
        )
    };
    let mut vars = PRODUCTION.to_vec();
    vars.push(("TRUST_PROXY", "hops:2"));
    let app = TestApp::spawn_with(Backend::Embedded, &vars).await;
    for (xfp, status) in [("https, http", "200"), ("https", "400"), ("http, https", "400"), ("a, https, http", "200")] {
        let answer = raw_exchange(&app.base, discovery(xfp).as_bytes(), Duration::from_secs(5)).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}")), "{xfp}: {answer}");
    }

    // The per-IP limit counts the address the nearest proxy saw (1 hop: the rightmost entry).
    let app =
        TestApp::spawn_with(Backend::Embedded, &[("TRUST_PROXY", "hops:1"), ("HELIX_AGENT_IP_RATE_LIMIT", "1")]).await;
    let post = async |xff: Option<&str>| {
        let mut req = app.http.post(format!("{}/api/v1/agent-runs", app.base)).json(&json!({}));
        if let Some(xff) = xff {
            req = req.header("x-forwarded-for", xff);
        }
        req.send().await.unwrap().status().as_u16()
    };
    assert_eq!(post(Some("192.0.2.9, 198.51.100.1")).await, 401);
    assert_eq!(post(Some("192.0.2.9, 198.51.100.2")).await, 401, "another client address");
    assert_eq!(post(Some("198.51.100.1")).await, 429, "the same client address");
    // Without the header, nothing is believed: the socket peer is the address.
    assert_eq!(post(None).await, 401);
    assert_eq!(post(Some("")).await, 429, "an empty entry is no address: the peer again");
}
