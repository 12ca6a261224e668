//! Runs listed by their owners, on both store backends: `GET /api/v1/agent-runs` lists the
//! caller's own runs (its agent binding's), newest first, paged by cursor and filtered by
//! status; the console's JSON twins (`/api/account/runs…`, cookie, same-origin) list and
//! open the runs of the agent bindings of the signed-in account under the owner tuple the
//! browser signed in with (the bearer routes' tuple) and cancel one through the run's own
//! cancel, even while its turn runs; another tenant's or another account's run is not found.

use std::sync::Arc;
use std::time::Duration;

use helix_core::executor::scripted::Step;
use helix_integration_tests::support::runs::{assert_contiguous, completing_step, kinds};
use helix_integration_tests::*;
use reqwest::Method;
use serde_json::{Value, json};

const READ_WRITE: &[&str] = &["helix.agent_runs.read", "helix.agent_runs.write", "helix.data.research_library.read"];

fn objective(text: &str) -> Value {
    json!({ "objective": text, "database_scope": ["research_library"] })
}

async fn started(app: &TestApp, token: &str, text: &str) -> String {
    app.started(token, objective(text)).await["run_id"].as_str().unwrap().to_owned()
}

async fn list(app: &TestApp, token: &str, query: &str) -> (u16, Value) {
    read(app.get(&format!("/api/v1/agent-runs{query}"), token).send().await.unwrap()).await
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_owned()).collect()
}

async fn browse(app: &TestApp, cookie: &str, path: &str) -> (u16, Value) {
    read(app.browser(Method::GET, path, cookie).send().await.unwrap()).await
}

/// Two agent bindings of alice's account (tenants a and b) and bob's account.
struct Owners {
    a: String,
    b: String,
    bob: String,
}

async fn owners(app: &TestApp) -> Owners {
    Owners {
        a: app.token_for("alice", "tenant-a", READ_WRITE).await,
        b: app.token_for("alice", "tenant-b", READ_WRITE).await,
        bob: app.token_for("bob", "tenant-a", READ_WRITE).await,
    }
}

async fn the_list_route_shows_each_binding_its_own_runs_newest_first(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let o = owners(&app).await;
    let first = started(&app, &o.a, "first of a").await;
    let of_b = started(&app, &o.b, "one of b").await;
    let second = started(&app, &o.a, "second of a").await;
    let of_bob = started(&app, &o.bob, "one of bob").await;

    let (status, page) = list(&app, &o.a, "").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["schema"], "helix.agent_run_list.v1");
    assert_eq!(ids(&page), [second.clone(), first.clone()], "a's own runs, newest first");
    assert_eq!((page["has_more"].as_bool(), page["next_cursor"].is_null()), (Some(false), true));
    assert_eq!(page["answer_authority"], false);
    assert_eq!(page["runs"][0]["objective"], "second of a");
    assert_eq!(ids(&list(&app, &o.b, "").await.1), [of_b]);
    assert_eq!(ids(&list(&app, &o.bob, "").await.1), [of_bob]);

    let (status, _) = read(app.cancel(&o.a, &first, "list-cancel-0001", json!({"expected_version": 1})).await).await;
    assert_eq!(status, 200);
    assert_eq!(ids(&list(&app, &o.a, "?status=cancelled").await.1), std::slice::from_ref(&first));
    assert_eq!(ids(&list(&app, &o.a, "?status=waiting").await.1), [second]);
    assert!(ids(&list(&app, &o.a, "?status=queued").await.1).is_empty());
    assert!(ids(&list(&app, &o.a, "?status=needs_input").await.1).is_empty());

    for bad in ["?status=nope", "?owner=x", "?limit=5", "?status=waiting&status=waiting", "?cursor=hpc1_x"] {
        let (status, err) = list(&app, &o.a, bad).await;
        assert_eq!((status, code(&err)), (400, "invalid_request"), "{bad}: {err}");
    }
    let read_only = app.token_for("alice", "tenant-a", &["helix.data.research_library.read"]).await;
    let (status, err) = list(&app, &read_only, "").await;
    assert_eq!((status, code(&err)), (403, "insufficient_scope"), "{err}");
    let (status, _) = list(&app, "not-a-token", "").await;
    assert_eq!(status, 401);
}

async fn the_list_pages_by_cursor_and_a_cursor_is_its_callers_only(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let o = owners(&app).await;
    let mut started_ids = vec![];
    for i in 0..27 {
        started_ids.push(started(&app, &o.a, &format!("run {i}")).await);
    }
    started_ids.reverse();
    let (_, first) = list(&app, &o.a, "").await;
    assert_eq!(ids(&first).len(), 25);
    assert_eq!(first["has_more"], true);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    assert!(cursor.starts_with("hpc1_"));
    let (status, second) = list(&app, &o.a, &format!("?cursor={cursor}")).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!([ids(&first), ids(&second)].concat(), started_ids, "every run once, newest first");
    assert!(second["next_cursor"].is_null());
    let (status, err) = list(&app, &o.b, &format!("?cursor={cursor}")).await;
    assert_eq!((status, code(&err)), (400, "invalid_request"), "another binding's cursor: {err}");
    let cookie = app.session("alice").await;
    let (status, _) = browse(&app, &cookie, &format!("/api/account/runs?cursor={cursor}")).await;
    assert_eq!(status, 400, "a bearer list's cursor is not the console's");
}

async fn the_console_lists_the_runs_of_the_owner_tuple_it_signed_in_with_and_no_other(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let o = owners(&app).await;
    let of_a = started(&app, &o.a, "watch the lab").await;
    let of_b = started(&app, &o.b, "read the papers").await;
    let of_bob = started(&app, &o.bob, "bob's own").await;
    // alice's account under tenant a, and the same account under tenant b.
    let (cookie, cookie_b) = (app.session("alice").await, app.session_in("alice", "tenant-b").await);

    let (status, page) = browse(&app, &cookie, "/api/account/runs").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), std::slice::from_ref(&of_a), "tenant a's run only: not tenant b's, not bob's");
    assert_eq!(ids(&browse(&app, &cookie_b, "/api/account/runs").await.1), std::slice::from_ref(&of_b));
    assert_eq!(ids(&browse(&app, &cookie_b, "/api/account/runs?status=waiting").await.1), std::slice::from_ref(&of_b));
    let (status, run) = browse(&app, &cookie_b, &format!("/api/account/runs/{of_b}")).await;
    assert_eq!((status, run["objective"].as_str()), (200, Some("read the papers")));
    // The bearer routes answer the same for the same tenant's run of the other tenant.
    let (status, err) = read(app.get(&format!("/api/v1/agent-runs/{of_b}"), &o.a).send().await.unwrap()).await;
    assert_eq!((status, code(&err)), (404, "not_found"), "REST: tenant a does not see tenant b's run");
    for (cookie, other) in [(&cookie, &of_b), (&cookie, &of_bob), (&cookie_b, &of_a)] {
        for path in [
            format!("/api/account/runs/{other}"),
            format!("/api/account/runs/{other}/events"),
            format!("/api/account/runs/{other}/evidence"),
        ] {
            let (status, err) = browse(&app, cookie, &path).await;
            assert_eq!((status, code(&err)), (404, "not_found"), "{path}");
        }
        let res = app.browser(Method::GET, &format!("/runs/{other}"), cookie).send().await.unwrap();
        assert_eq!(res.status(), 404, "the run page of {other}");
        let res = app
            .browser(Method::POST, &format!("/api/account/runs/{other}/cancel"), cookie)
            .header("Idempotency-Key", "console-cancel-other-1")
            .json(&json!({"expected_version": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404, "{other} cannot be cancelled from this console");
    }
    for (token, id) in [(&o.a, &of_a), (&o.b, &of_b), (&o.bob, &of_bob)] {
        let (status, run) = read(app.get(&format!("/api/v1/agent-runs/{id}"), token).send().await.unwrap()).await;
        assert_eq!(status, 200, "{run}");
        assert_ne!(run["completion_status"], "cancelled", "nothing was cancelled: {run}");
    }
    let (status, err) = browse(&app, &cookie, "/api/account/runs/run_missing0000").await;
    assert_eq!((status, code(&err)), (404, "not_found"));
    let (status, err) = browse(&app, &cookie, "/api/account/runs?bearer=1").await;
    assert_eq!((status, code(&err)), (400, "invalid_request"));
    let cross = app.http.get(format!("{}/api/account/runs", app.base)).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(cross.status(), 403, "the JSON twins are same-origin only");

    let page = app.browser(Method::GET, "/runs", &cookie).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("watch the lab"), "{page}");
    assert!(!page.contains("read the papers") && !page.contains(&of_b), "tenant b's run is not listed: {page}");
    assert!(!page.contains("bob&#x27;s own") && !page.contains(&of_bob));
    let bob_cookie = app.session("bob").await;
    let res = app.browser(Method::GET, &format!("/runs/{of_a}"), &bob_cookie).send().await.unwrap();
    assert_eq!(res.status(), 404, "alice's run page is not found for bob");
    let page = app.browser(Method::GET, &format!("/runs/{of_a}"), &cookie).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let text = page.text().await.unwrap();
    assert!(text.contains("Run started") && text.contains("not an answer authority"), "{text}");
}

/// A session stored before it recorded its owner tuple reaches no run (fail closed) until
/// the person signs in again.
async fn a_session_without_an_owner_tuple_reaches_no_run(backend: Backend) {
    use helix_core::domain::account::BrowserSecret;
    use helix_core::service::records::session_key;
    use helix_core::service::records::sessions::SessionRecord;
    let app = TestApp::spawn_with(backend, &[]).await;
    let o = owners(&app).await;
    let of_a = started(&app, &o.a, "watch the lab").await;
    let cookie = app.session("alice").await;
    let token = BrowserSecret::parse(cookie.strip_prefix("helix_session=").unwrap()).unwrap();
    let store = app.state.services.store.clone();
    let item = store.get(&session_key(&token.hash())).await.unwrap().unwrap();
    let old = SessionRecord { owner_hash: None, ..SessionRecord::from_item(&item).unwrap() };
    store.put(old.to_item(&token.hash()), None).await.unwrap();

    let (status, page) = browse(&app, &cookie, "/api/account/runs").await;
    assert_eq!((status, ids(&page).len()), (200, 0), "{page}");
    let (status, err) = browse(&app, &cookie, &format!("/api/account/runs/{of_a}")).await;
    assert_eq!((status, code(&err)), (404, "not_found"));
    let fresh = app.session("alice").await;
    assert_eq!(ids(&browse(&app, &fresh, "/api/account/runs").await.1), [of_a]);
}

async fn the_console_cancels_a_run_whose_turn_is_running(backend: Backend) {
    let app = Arc::new(TestApp::spawn_with(backend, &[]).await);
    let o = owners(&app).await;
    let id = started(&app, &o.b, "a slow one").await;
    // The console of the tenant the run's agent signed in under (tenant b).
    app.script(Step::Delay(Duration::from_secs(20), Box::new(completing_step(1))));
    let turn = {
        let (app, token, id) = (app.clone(), o.b.clone(), id.clone());
        let go = json!({"expected_version": 1, "instruction": "go"});
        tokio::spawn(async move { read(app.continue_run(&token, &id, "console-slow-01", go).await).await })
    };
    let cookie = app.session_in("alice", "tenant-b").await;
    for _ in 0..200 {
        if browse(&app, &cookie, &format!("/api/account/runs/{id}")).await.1["lifecycle_status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, running) = browse(&app, &cookie, "/api/account/runs?status=running").await;
    assert_eq!(ids(&running), std::slice::from_ref(&id), "the running run is listed as running");
    let started_at = std::time::Instant::now();
    let cancel = |key: &'static str, version: u64| {
        app.browser(Method::POST, &format!("/api/account/runs/{id}/cancel"), &cookie)
            .header("Idempotency-Key", key)
            .json(&json!({"expected_version": version}))
            .send()
    };
    let (status, run) = read(cancel("console-cancel-001", 1).await.unwrap()).await;
    assert_eq!((status, run["completion_status"].as_str()), (200, Some("cancelled")), "{run}");
    let (turn_status, turn_body) = turn.await.unwrap();
    assert!(started_at.elapsed() < Duration::from_secs(5), "the cancel stopped the running turn");
    assert_eq!((turn_status, code(&turn_body)), (409, "run_not_continuable"));
    let replay = cancel("console-cancel-001", 1).await.unwrap();
    assert_eq!(replay.headers()["idempotency-replayed"], "true");
    let (status, err) = read(cancel("console-cancel-002", 2).await.unwrap()).await;
    assert_eq!((status, code(&err)), (409, "run_not_continuable"), "a second cancel: the run has ended");
    let events = app.events(&o.b, &id).await;
    assert_contiguous(&events);
    assert_eq!(kinds(&events), ["run_started", "run_cancelled"]);
}

/// An empty, repeated or unknown listing parameter is `invalid_request` saying which and
/// why (an empty `status` lists the statuses), never quoting the caller's value.
async fn a_listing_query_refusal_says_what_is_wrong(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token_for("alice", "tenant-a", helix_integration_tests::support::rooms::ALL).await;
    let cookie = app.session("alice").await;
    let statuses = "give a lifecycle status (queued, running, waiting, completed, failed, cancelled) or a completion \
                    status (pending, completed, needs_more_evidence, needs_input, conflict_detected, blocked, failed, \
                    budget_exhausted, cancelled)";
    let cursor = "give the next_cursor of the previous page, or no cursor for the first page";
    let cases = [
        ("?status=", format!("status: empty value; {statuses}")),
        ("?status", format!("status: empty value; {statuses}")),
        ("?status=nope-4242", format!("status: unknown value; {statuses}")),
        ("?status=waiting&status=running", "status: give it once".to_owned()),
        ("?cursor=", format!("cursor: empty value; {cursor}")),
        ("?limit=5", "the only query parameters are status, cursor".to_owned()),
    ];
    for (query, want) in &cases {
        let (status, err) = list(&app, &token, query).await;
        assert_eq!((status, code(&err)), (400, "invalid_request"), "{query}: {err}");
        assert_eq!(err["error"]["message"], format!("invalid request: {want}"), "{query}");
        assert!(!err.to_string().contains("nope-4242"), "{err}");
        // The console's JSON twin reads the same query by the same rule.
        let (status, err) = browse(&app, &cookie, &format!("/api/account/runs{query}")).await;
        assert_eq!((status, code(&err)), (400, "invalid_request"), "console {query}: {err}");
        assert_eq!(err["error"]["message"], format!("invalid request: {want}"), "console {query}");
    }
    // The cursor-only listings say the same of an empty or repeated cursor.
    for (query, want) in [
        ("?cursor=", format!("cursor: empty value; {cursor}")),
        ("?cursor", format!("cursor: empty value; {cursor}")),
        ("?cursor=a&cursor=b", "cursor: give it once".to_owned()),
        ("?status=running", "the only query parameter is cursor".to_owned()),
    ] {
        let (status, err) = read(app.get(&format!("/api/v1/rooms{query}"), &token).send().await.unwrap()).await;
        assert_eq!((status, code(&err)), (400, "invalid_request"), "rooms {query}: {err}");
        assert_eq!(err["error"]["message"], format!("invalid request: {want}"), "rooms {query}");
    }
}

on_both_backends!(
    a_listing_query_refusal_says_what_is_wrong,
    the_list_route_shows_each_binding_its_own_runs_newest_first,
    the_list_pages_by_cursor_and_a_cursor_is_its_callers_only,
    the_console_lists_the_runs_of_the_owner_tuple_it_signed_in_with_and_no_other,
    a_session_without_an_owner_tuple_reaches_no_run,
    the_console_cancels_a_run_whose_turn_is_running,
);

#[tokio::test]
async fn listing_runs_takes_the_documented_round_trips() {
    let app = TestApp::spawn().await;
    let o = owners(&app).await;
    started(&app, &o.a, "counted").await;
    let cookie = app.session("alice").await;
    app.faults.take_log();
    list(&app, &o.a, "").await;
    assert_eq!(app.faults.take_log(), ["batch_get", "query", "batch_get"], "list: principal, entries, runs");
    browse(&app, &cookie, "/api/account/runs").await;
    assert_eq!(app.faults.take_log(), ["get", "get", "query", "batch_get"], "console list: session, entries, runs");
    let id = ids(&list(&app, &o.a, "").await.1).remove(0);
    app.faults.take_log();
    app.browser(Method::GET, &format!("/runs/{id}"), &cookie).send().await.unwrap();
    assert_eq!(app.faults.take_log(), ["get", "get", "get", "query"], "run page: session, run, events");
    let res = app
        .browser(Method::POST, &format!("/api/account/runs/{id}/cancel"), &cookie)
        .header("Idempotency-Key", "counted-console-cancel")
        .json(&json!({"expected_version": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(app.faults.take_log(), ["get", "get", "batch_get", "transact"], "console cancel");
}
