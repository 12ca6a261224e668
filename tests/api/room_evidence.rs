//! Bound-room evidence in runs over real HTTP on both store backends: a run with
//! `bound_room_evidence` completes on live observations of its bound room (local
//! executor, authority verified), every recheck fails its turn with its own code
//! (binding, membership, consent, room, source admission, freshness, provenance), the
//! executor receives the admitted observations with `execution_enabled: false`, and the
//! membership/consent check is repeated just before projection.

use std::sync::Arc;
use std::time::Duration;

use helix_core::domain::source::{ROOM_EVIDENCE_FAMILY, observation_ref};
use helix_core::executor::local::LocalExecutor;
use helix_core::executor::scripted::Step;
use helix_core::store::Attr;
use helix_integration_tests::*;
use serde_json::{Value, json};

use helix_integration_tests::support::browser::between;
use helix_integration_tests::support::runs::failure;
use helix_integration_tests::support::sources::{ALL, batch, manifest};

const SCOPES: &str = "research_library,bound_room_evidence";
const MAX_AGE_MS: &str = "5000";

fn config() -> Vec<(&'static str, &'static str)> {
    vec![("HELIX_AGENT_DATABASE_SCOPES", SCOPES), ("HELIX_BOUND_ROOM_EVIDENCE_MAX_AGE_MS", MAX_AGE_MS)]
}

/// A room of alice (developer) with one claimed source whose producer registered its manifest.
struct World {
    token: String,
    cookie: String,
    room_id: String,
    source_id: String,
    bearer: String,
}

async fn world(app: &TestApp) -> World {
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&token, "Lab").await;
    let (source_id, bearer) = app.claimed_source(&token, &cookie, &room_id, "overworld").await;
    let (status, v) = app.ingress(&bearer, "manifest", &manifest("overworld", 1)).await;
    assert_eq!(status, 200, "{v}");
    World { token, cookie, room_id, source_id, bearer }
}

async fn observe(app: &TestApp, w: &World, epoch: u64, ids: &[&str]) {
    let (status, v) = app.ingress(&w.bearer, "observations", &batch("overworld", epoch, ids, 0)).await;
    assert_eq!(status, 202, "{v}");
}

/// Starts a `bound_room_evidence` run and binds it to the world's room.
async fn bound_run(app: &TestApp, w: &World) -> String {
    app.started_and_bound(&w.token, &w.room_id, "What is happening in the shared world?", &["bound_room_evidence"])
        .await
}

async fn turn(app: &TestApp, token: &str, run_id: &str) -> Value {
    app.turn_with(token, run_id, "Report what the room shows now.").await
}

/// The owner raises the room's consent version through the `/rooms` page form.
async fn raise_consent(app: &TestApp, w: &World) {
    let (status, body) =
        app.form(&w.cookie, "/rooms/consent/raise", &[("room_id", &w.room_id), ("confirm", "yes")]).await;
    assert_eq!(status, 303, "{body}");
}

/// bob joins the world's room through an invite of its owner on the `/rooms` page,
/// accepting the consent version the preview shows: his token and signed-in browser.
async fn join_as_bob(app: &TestApp, w: &World) -> (String, String) {
    let bob = app.token_for("bob", "tenant-a", ALL).await;
    let bob_web = app.session("bob").await;
    let (status, html) = app.form(&w.cookie, "/rooms/invite", &[("room_id", &w.room_id)]).await;
    assert_eq!(status, 200, "{html}");
    let code = between(&html, "id=\"invite-code\">", "<").to_owned();
    let (status, html) = app.form(&bob_web, "/rooms/join/preview", &[("code", &code)]).await;
    assert_eq!(status, 200, "{html}");
    let version = between(&html, "id=\"join-consent-version\">", "<").to_owned();
    let (status, body) = app.form(&bob_web, "/rooms/join", &[("code", &code), ("consent_version", &version)]).await;
    assert_eq!(status, 303, "{body}");
    (bob, bob_web)
}

/// A scripted artifact citing the given observations as `shared_live_room_evidence`.
fn room_step(source_id: &str, ids: &[&str], name_family: bool) -> Step {
    let refs: Vec<String> = ids.iter().map(|id| observation_ref(source_id, id)).collect();
    let evidence: Vec<Value> = refs
        .iter()
        .map(|r| json!({ "ref": r, "family": ROOM_EVIDENCE_FAMILY, "source": "room", "content_sha256": "00", "excerpt": "x" }))
        .collect();
    let families = if name_family { vec![ROOM_EVIDENCE_FAMILY] } else { vec![] };
    let artifact = serde_json::from_value(json!({
        "solver_status": "succeeded",
        "summary": "read the room",
        "observation_refs": refs,
        "evidence": evidence,
        "satisfied_evidence_families": families,
    }))
    .unwrap();
    Step::Signed { artifact, text: "Steve joined the overworld.".into(), refs }
}

// ---------------------------------------------------------------------------------------------

async fn a_bound_run_completes_on_live_room_evidence_then_blocks_when_it_goes_stale(backend: Backend) {
    let local = Arc::new(LocalExecutor::from_documents(vec![], signer()));
    let app = TestApp::spawn_with_executor(backend, &config(), local).await;
    let w = world(&app).await;
    observe(&app, &w, 1, &["tick-0001", "tick-0002"]).await;
    let run_id = bound_run(&app, &w).await;
    let done = turn(&app, &w.token, &run_id).await;
    assert_eq!(done["completion_status"], "completed", "{done}");
    assert_eq!(done["terminal_authority_status"], "authorized", "{done}");
    assert!(done["unresolved_requirements"].as_array().unwrap().is_empty(), "{done}");
    let evidence: Value =
        app.get(&format!("/api/v1/agent-runs/{run_id}/evidence"), &w.token).send().await.unwrap().json().await.unwrap();
    let items = evidence["evidence"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{evidence}");
    assert!(items.iter().all(|i| i["family"] == ROOM_EVIDENCE_FAMILY));
    assert!(!evidence.to_string().contains(&w.bearer), "no bearer in evidence");

    // The producer stops; past the freshness window the next run's turn is blocked.
    let second = bound_run(&app, &w).await;
    app.state.services.clock.advance(6);
    let stale = turn(&app, &w.token, &second).await;
    assert_eq!(stale["completion_status"], "blocked", "{stale}");
    assert_eq!(failure(&stale), "room_evidence_stale", "{stale}");
    assert_ne!(stale["terminal_authority_status"], "authorized");
}

async fn the_executor_receives_admitted_observations_and_the_family_needs_current_refs(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config()).await;
    let w = world(&app).await;
    observe(&app, &w, 1, &["tick-0001"]).await;
    let run_id = bound_run(&app, &w).await;

    // Naming the family without this turn's refs cannot clear the gate ...
    app.script(Step::Artifact(
        serde_json::from_value(json!({
            "solver_status": "succeeded", "summary": "claims", "satisfied_evidence_families": [ROOM_EVIDENCE_FAMILY],
        }))
        .unwrap(),
    ));
    let v = turn(&app, &w.token, &run_id).await;
    assert_eq!(v["completion_status"], "blocked", "{v}");
    assert!(v.to_string().contains("required_evidence:shared_live_room_evidence"), "{v}");
    let seen = app.executor.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.schema_version(), "helix.turn_request.v2");
    let ev = seen.room_evidence.expect("room evidence in the executor input");
    assert!(!ev.execution_enabled);
    assert_eq!(ev.room_id, w.room_id);
    assert_eq!(ev.observations.len(), 1);
    let o = &ev.observations[0];
    assert_eq!(o.observation_ref, observation_ref(&w.source_id, "tick-0001"));
    assert_eq!((o.provenance.request_id.as_str(), o.provenance.producer_epoch), ("tick-0001", 1));
    assert_eq!(o.provenance.manifest_hash, manifest("overworld", 1)["manifest_hash"]);
    assert!(!serde_json::to_string(&ev).unwrap().contains(&w.bearer));

    // ... current observation refs without naming the family cannot either ...
    app.script(room_step(&w.source_id, &["tick-0001"], false));
    let v = turn(&app, &w.token, &run_id).await;
    assert_eq!(v["completion_status"], "blocked", "{v}");
    // ... both together complete the run with verified authority.
    app.script(room_step(&w.source_id, &["tick-0001"], true));
    let v = turn(&app, &w.token, &run_id).await;
    assert_eq!(
        (v["completion_status"].as_str(), v["terminal_authority_status"].as_str()),
        (Some("completed"), Some("authorized")),
        "{v}"
    );
}

async fn each_room_recheck_fails_the_turn_with_its_own_code(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config()).await;
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&token, "Lab").await;
    let w = World { token, cookie, room_id, source_id: String::new(), bearer: String::new() };

    // No source at all, then a source whose credential is claimed but no manifest registered.
    let run_id = bound_run(&app, &w).await;
    assert_eq!(failure(&turn(&app, &w.token, &run_id).await), "room_source_not_admitted");
    let (source_id, bearer) = app.claimed_source(&w.token, &w.cookie, &w.room_id, "overworld").await;
    assert_eq!(failure(&turn(&app, &w.token, &run_id).await), "room_source_not_admitted");
    let w = World { source_id, bearer, ..w };

    // Admitted, but nothing observed yet: stale, never a silent empty result.
    assert_eq!(app.ingress(&w.bearer, "manifest", &manifest("overworld", 1)).await.0, 200);
    assert_eq!(failure(&turn(&app, &w.token, &run_id).await), "room_evidence_stale");

    // Observed under epoch 1, then the producer re-registers with epoch 2: the old
    // observations no longer match the source's admission exactly.
    observe(&app, &w, 1, &["tick-0001"]).await;
    assert_eq!(app.ingress(&w.bearer, "manifest", &manifest("overworld", 2)).await.0, 200);
    assert_eq!(failure(&turn(&app, &w.token, &run_id).await), "room_evidence_identity_mismatch");
    observe(&app, &w, 2, &["tick-0002"]).await;
    app.script(room_step(&w.source_id, &["tick-0002"], true));
    let ok = turn(&app, &w.token, &run_id).await;
    assert_eq!(ok["completion_status"], "completed", "{ok}");

    // A new run, then the owner raises the consent version on the `/rooms` page (the
    // owner's raise is its own acceptance, but of a version the binding was not made under).
    let run2 = bound_run(&app, &w).await;
    raise_consent(&app, &w).await;
    assert_eq!(failure(&turn(&app, &w.token, &run2).await), "room_consent_changed");

    // A run bound under the new version passes the consent check; then room closed,
    // policy lock, binding withdrawn.
    let run3 = bound_run(&app, &w).await;
    let store = app.state.services.store.clone();
    let room_key = helix_core::service::records::rooms::room_key(&w.room_id);
    let room_item = store.get(&room_key).await.unwrap().unwrap();
    let mut closed = room_item.clone();
    closed.attrs.insert("status".into(), Attr::S("closed".into()));
    store.put(closed, None).await.unwrap();
    assert_eq!(failure(&turn(&app, &w.token, &run3).await), "room_not_active");
    store.put(room_item, None).await.unwrap();

    let lock = |on| helix_core::domain::account::PolicyChange { rooms_locked: Some(on), ..Default::default() };
    app.set_policy("alice", lock(true)).await;
    assert_eq!(failure(&turn(&app, &w.token, &run3).await), "room_policy_changed");
    app.set_policy("alice", lock(false)).await;

    let slot = store.get(&helix_core::service::records::rooms::run_room_slot(&run3)).await.unwrap().unwrap();
    let binding_ref = slot.s("binding_ref").unwrap().to_owned();
    let (status, _) = read(
        app.http
            .delete(format!("{}/api/v1/rooms/run-bindings/{binding_ref}", app.base))
            .bearer_auth(&w.token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(failure(&turn(&app, &w.token, &run3).await), "room_binding_missing");

    // Revocation of the source: no admitted source any more.
    let run4 = bound_run(&app, &w).await;
    let (status, _) = read(
        app.browser(reqwest::Method::POST, "/api/account/room-sources/revocations", &w.cookie)
            .json(&json!({ "room_id": w.room_id, "source_id": w.source_id }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(failure(&turn(&app, &w.token, &run4).await), "room_source_not_admitted");
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "only the admitted turn reached the executor");
}

/// Starts a turn of `run_id` whose executor takes 2 s to cite the world's observation, and
/// returns once the executor has the turn (its answer still pending).
async fn turn_in_flight(app: &TestApp, w: &World, run_id: &str) -> tokio::task::JoinHandle<reqwest::Response> {
    app.script(Step::Delay(Duration::from_secs(2), Box::new(room_step(&w.source_id, &["tick-0001"], true))));
    let run: Value =
        app.get(&format!("/api/v1/agent-runs/{run_id}"), &w.token).send().await.unwrap().json().await.unwrap();
    let version = run["version"].clone();
    let (token, id) = (w.token.clone(), run_id.to_owned());
    let (base, http) = (app.base.clone(), app.http.clone());
    let seen = app.executor.seen.lock().unwrap().len();
    let pending = tokio::spawn(async move {
        http.post(format!("{base}/api/v1/agent-runs/{id}/continue"))
            .bearer_auth(token)
            .header("Idempotency-Key", "turn-in-flight-01")
            .json(&json!({ "expected_version": version, "instruction": "Report what the room shows now." }))
            .send()
            .await
            .unwrap()
    });
    while app.executor.seen.lock().unwrap().len() == seen {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    pending
}

/// The turn in flight was blocked with `code` before projection: nothing of it projected.
async fn assert_blocked_before_projection(
    app: &TestApp,
    w: &World,
    run_id: &str,
    pending: tokio::task::JoinHandle<reqwest::Response>,
    code: &str,
) {
    let (status, v) = read(pending.await.unwrap()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(failure(&v), code, "{v}");
    assert_eq!(v["completion_status"], "blocked");
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "the executor ran; its artifact was not projected");
    let evidence: Value =
        app.get(&format!("/api/v1/agent-runs/{run_id}/evidence"), &w.token).send().await.unwrap().json().await.unwrap();
    assert!(evidence["evidence"].as_array().unwrap().is_empty(), "{evidence}");
}

async fn a_consent_bump_during_the_turn_blocks_its_projection(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config()).await;
    let w = world(&app).await;
    observe(&app, &w, 1, &["tick-0001"]).await;
    let run_id = bound_run(&app, &w).await;
    let pending = turn_in_flight(&app, &w, &run_id).await;
    // The owner raises the consent version while the executor works on the turn.
    raise_consent(&app, &w).await;
    assert_blocked_before_projection(&app, &w, &run_id, pending, "room_consent_changed").await;
}

async fn a_binding_withdrawn_during_the_turn_blocks_its_projection(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config()).await;
    let w = world(&app).await;
    observe(&app, &w, 1, &["tick-0001"]).await;
    let run_id = bound_run(&app, &w).await;
    let slot =
        app.state.services.store.get(&helix_core::service::records::rooms::run_room_slot(&run_id)).await.unwrap();
    let binding_ref = slot.unwrap().s("binding_ref").unwrap().to_owned();
    let pending = turn_in_flight(&app, &w, &run_id).await;
    // The owner withdraws the run's binding while the executor works on the turn.
    let (status, _) = read(
        app.http
            .delete(format!("{}/api/v1/rooms/run-bindings/{binding_ref}", app.base))
            .bearer_auth(&w.token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_blocked_before_projection(&app, &w, &run_id, pending, "room_binding_missing").await;
}

async fn a_member_removed_by_the_owner_is_blocked_on_the_next_turn(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config()).await;
    let w = world(&app).await;
    observe(&app, &w, 1, &["tick-0001"]).await;
    // bob joins alice's room on the `/rooms` page and binds his own evidence run to it.
    let (bob, _bob_web) = join_as_bob(&app, &w).await;
    let alice_web = w.cookie.clone();
    let bob_world = World { token: bob.clone(), cookie: String::new(), ..w };
    let run_id = bound_run(&app, &bob_world).await;
    // Fresh evidence before each turn, so that on a loaded machine the turn cannot be
    // blocked as stale (the window is short) before the membership recheck is reached.
    observe(&app, &bob_world, 1, &["tick-0002"]).await;
    // His first turn passes every recheck and reaches the executor (blocked only on the
    // evidence gate: the scripted artifact cites nothing).
    app.script(Step::Artifact(
        serde_json::from_value(json!({ "solver_status": "succeeded", "summary": "looked" })).unwrap(),
    ));
    let v = turn(&app, &bob, &run_id).await;
    assert_eq!(v["completion_status"], "blocked", "{v}");
    assert_eq!(failure(&v), "", "no room failure: {v}");
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1);

    // The owner removes bob through the `/rooms` page form: his next turn is blocked.
    let bob_ref = helix_core::domain::account::account_ref(&helix_core::domain::account::account_id_for(
        &app.state.services.config.oauth.provider,
        "bob",
    ));
    let (status, body) = app
        .form(
            &alice_web,
            "/rooms/members/remove",
            &[("room_id", &bob_world.room_id), ("account_ref", &bob_ref), ("confirm", "yes")],
        )
        .await;
    assert_eq!(status, 303, "{body}");
    observe(&app, &bob_world, 1, &["tick-0003"]).await;
    let v = turn(&app, &bob, &run_id).await;
    assert_eq!(v["completion_status"], "blocked", "{v}");
    assert_eq!(failure(&v), "room_membership_changed", "{v}");
    assert_ne!(v["terminal_authority_status"], "authorized");
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "the removed member's turn never reached the executor");
}

async fn the_newest_fresh_observations_reach_the_executor(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config()).await;
    let w = world(&app).await;
    for (prefix, age) in [("old", 3_000), ("mid", 2_000), ("new", 1_000)] {
        let ids: Vec<String> = (0..25).map(|i| format!("{prefix}-{i:04}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (status, v) = app.ingress(&w.bearer, "observations", &batch("overworld", 1, &ids, age)).await;
        assert_eq!(status, 202, "{v}");
    }
    let run_id = bound_run(&app, &w).await;
    app.script(room_step(&w.source_id, &["new-0024"], true));
    let v = turn(&app, &w.token, &run_id).await;
    assert_eq!(v["completion_status"], "completed", "{v}");
    let seen = app.executor.seen.lock().unwrap().last().cloned().unwrap();
    let obs = seen.room_evidence.unwrap().observations;
    assert_eq!(obs.len(), 20, "bounded");
    assert!(obs.iter().all(|o| o.provenance.request_id.starts_with("new-")), "the newest, not the oldest");
}

on_both_backends!(
    a_bound_run_completes_on_live_room_evidence_then_blocks_when_it_goes_stale,
    the_executor_receives_admitted_observations_and_the_family_needs_current_refs,
    each_room_recheck_fails_the_turn_with_its_own_code,
    a_consent_bump_during_the_turn_blocks_its_projection,
    a_binding_withdrawn_during_the_turn_blocks_its_projection,
    a_member_removed_by_the_owner_is_blocked_on_the_next_turn,
    the_newest_fresh_observations_reach_the_executor,
);
