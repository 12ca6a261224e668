//! The environment probe (`bound_room_environment_probe`) over real HTTP on both store
//! backends: a turn queues a probe for the bound room's paired read-only source, a
//! producer (driven here over the real ingress) finds it on its next poll and answers it,
//! and the answer reaches the executor as a current-turn observation; the
//! `shared_live_room_environment_probe` family counts only when the turn cites it. A probe
//! is visible to and answerable by its own source only, once, while pending; no answer in
//! time is the typed `room_probe_unanswered`; no binding, no paired source or two paired
//! sources are typed turn failures.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use helix_core::domain::source::{PROBE_FAMILY, adapter};
use helix_core::executor::local::LocalExecutor;
use helix_core::executor::scripted::Step;
use helix_integration_tests::*;
use serde_json::{Value, json};

use helix_integration_tests::support::runs::failure;
use helix_integration_tests::support::sources::{ALL, batch, manifest};

const SCOPES: &str = "research_library,bound_room_evidence,bound_room_environment_probe";
const PROBE: &str = "bound_room_environment_probe";

fn config(wait_ms: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![("HELIX_AGENT_DATABASE_SCOPES", SCOPES), ("HELIX_ROOM_PROBE_WAIT_MS", wait_ms)]
}

/// alice (developer) with a session and a room.
struct Owner {
    token: String,
    cookie: String,
    room_id: String,
}

async fn owner(app: &TestApp) -> Owner {
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&token, "Lab").await;
    Owner { token, cookie, room_id }
}

/// A claimed source of `profile` in the owner's room whose producer registered epoch 1:
/// (source_id, bearer).
async fn admitted_source(app: &TestApp, o: &Owner, room_id: &str, profile: &str, world: &str) -> (String, String) {
    let (source_id, bearer) = app.claimed_source_of(&o.token, &o.cookie, room_id, profile, world).await;
    let p = adapter(profile).unwrap();
    let mut m = manifest(world, 1);
    m["adapter_profile"] = json!(p.id);
    m["adapter_version"] = json!(p.version);
    m["adapter_hash"] = json!(p.adapter_hash());
    m["manifest_hash"] = json!(p.manifest_hash(world));
    let (status, v) = app.ingress(&bearer, "manifest", &m).await;
    assert_eq!(status, 200, "{v}");
    (source_id, bearer)
}

/// Starts a run with `scopes` and binds it to `room_id`.
async fn bound_run(app: &TestApp, token: &str, room_id: &str, scopes: &[&str]) -> String {
    app.started_and_bound(token, room_id, "What do the players carry right now?", scopes).await
}

async fn turn(app: &TestApp, token: &str, run_id: &str) -> Value {
    app.turn_with(token, run_id, "Check the inventories.").await
}

async fn poll(app: &TestApp, bearer: &str) -> (u16, Value) {
    read(
        app.http.get(format!("{}/api/ingress/room-sources/probes", app.base)).bearer_auth(bearer).send().await.unwrap(),
    )
    .await
}

fn answer(world: &str, request_id: &str) -> Value {
    json!({
        "manifest_hash": adapter("minecraft").unwrap().manifest_hash(world),
        "producer_epoch": 1,
        "request_id": request_id,
        "observed_at": chrono::Utc::now().to_rfc3339(),
        "summary": format!("Steve carries 12 oak logs in {world}"),
        "inventory": { "players": [ { "player": "Steve", "items": [ { "item": "minecraft:oak_log", "count": 12 } ] } ] },
    })
}

async fn answer_probe(app: &TestApp, bearer: &str, probe_id: &str, body: &Value) -> (u16, Value) {
    app.ingress(bearer, &format!("probes/{probe_id}/answer"), body).await
}

/// The probe ids seen and the answer receipts of a producer.
#[derive(Default)]
struct Seen {
    probes: Vec<Value>,
    receipts: Vec<Value>,
}

/// A producer polling ingress every 50 ms over real HTTP; it answers what it sees when
/// `answering` (else it only records the probes).
fn producer(
    app: &TestApp,
    bearer: &str,
    world: &str,
    answering: bool,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (http, base, bearer, world, out) =
        (app.http.clone(), app.base.clone(), bearer.to_owned(), world.to_owned(), seen.clone());
    let handle = tokio::spawn(async move {
        for n in 0u32.. {
            let list: Value = http
                .get(format!("{base}/api/ingress/room-sources/probes"))
                .bearer_auth(&bearer)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            for p in list["probes"].as_array().cloned().unwrap_or_default() {
                let id = p["probe_id"].as_str().unwrap().to_owned();
                if out.lock().unwrap().probes.iter().any(|q| q["probe_id"] == id.as_str()) {
                    continue;
                }
                out.lock().unwrap().probes.push(p);
                if answering {
                    let body = answer(&world, &format!("answer-{n:06}-{}", &id[4..12]));
                    let receipt: Value = http
                        .post(format!("{base}/api/ingress/room-sources/probes/{id}/answer"))
                        .bearer_auth(&bearer)
                        .json(&body)
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    out.lock().unwrap().receipts.push(receipt);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (handle, seen)
}

// ---------------------------------------------------------------------------------------------

async fn a_probe_run_completes_on_the_answer_of_its_paired_source(backend: Backend) {
    let local = Arc::new(LocalExecutor::from_documents(vec![], signer()));
    let app = TestApp::spawn_with_executor(backend, &config("8000"), local).await;
    let o = owner(&app).await;
    let (source_id, bearer) = admitted_source(&app, &o, &o.room_id, "minecraft", "overworld").await;
    let run_id = bound_run(&app, &o.token, &o.room_id, &[PROBE]).await;
    let (task, seen) = producer(&app, &bearer, "overworld", true);
    let done = turn(&app, &o.token, &run_id).await;
    task.abort();
    assert_eq!(done["completion_status"], "completed", "{done}");
    assert_eq!(done["terminal_authority_status"], "authorized", "{done}");

    let (probes, receipts) = {
        let seen = seen.lock().unwrap();
        (seen.probes.clone(), seen.receipts.clone())
    };
    assert_eq!(probes.len(), 1, "one probe per turn");
    let probe = &probes[0];
    assert_eq!(probe["schema"], "helix.room_source_probe.v1");
    assert_eq!(probe["capability"], "com.casimirbot.minecraft.inventory.check");
    assert_eq!(probe["source_id"], source_id.as_str());
    assert_eq!((probe["read_only"].as_bool(), probe["execution_enabled"].as_bool()), (Some(true), Some(false)));
    assert!(!probe.to_string().contains(&run_id), "the producer never learns the run");
    let receipt = &receipts[0];
    assert_eq!(receipt["schema"], "helix.room_source_probe_answer_receipt.v1", "{receipt}");
    let observation_ref = receipt["observation_ref"].as_str().unwrap();

    let evidence: Value =
        app.get(&format!("/api/v1/agent-runs/{run_id}/evidence"), &o.token).send().await.unwrap().json().await.unwrap();
    let items = evidence["evidence"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{evidence}");
    assert_eq!((items[0]["family"].as_str(), items[0]["ref"].as_str()), (Some(PROBE_FAMILY), Some(observation_ref)));
    assert!(!evidence.to_string().contains(&bearer), "no bearer in evidence");

    // The answer is the source's only report: Device Check sees it as a fresh observation.
    let call = json!({ "name": "helix_environment_device_check", "arguments": {} });
    let (_, v) = app.rpc("/mcp/device-check", &o.token, "tools/call", call).await;
    let sources = v["result"]["structuredContent"]["rooms"][0]["sources"].as_array().cloned().unwrap_or_default();
    let s = sources.iter().find(|s| s["source_id"] == source_id.as_str()).unwrap_or_else(|| panic!("{v}"));
    assert_eq!(s["freshness"], "fresh", "{v}");

    // Answered: nothing is pending any more, and a second answer is refused.
    let (status, list) = poll(&app, &bearer).await;
    assert_eq!((status, list["probes"].as_array().map(Vec::len)), (200, Some(0)), "{list}");
    let probe_id = probe["probe_id"].as_str().unwrap();
    let (status, err) = answer_probe(&app, &bearer, probe_id, &answer("overworld", "answer-again-0001")).await;
    assert_eq!((status, code(&err)), (409, "probe_not_pending"), "{err}");
    assert_eq!(err["error"]["details"]["reason"], "answered", "{err}");
}

async fn the_executor_gets_the_probe_and_the_family_needs_its_ref(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config("8000")).await;
    let o = owner(&app).await;
    let (source_id, bearer) = admitted_source(&app, &o, &o.room_id, "minecraft", "overworld").await;
    let run_id = bound_run(&app, &o.token, &o.room_id, &[PROBE]).await;
    let (task, seen) = producer(&app, &bearer, "overworld", true);

    // Naming the family while citing a ref the service did not issue for it: blocked.
    let artifact = |refs: Vec<String>| -> helix_core::domain::turn::TurnArtifact {
        let evidence: Vec<Value> = refs
            .iter()
            .map(|r| json!({ "ref": r, "family": PROBE_FAMILY, "source": "room", "content_sha256": "00", "excerpt": "x" }))
            .collect();
        serde_json::from_value(json!({
            "solver_status": "succeeded", "summary": "inventories", "observation_refs": refs,
            "evidence": evidence, "satisfied_evidence_families": [PROBE_FAMILY],
        }))
        .unwrap()
    };
    let forged = vec!["obsv_000000000000000000000000".to_string()];
    app.script(Step::Signed { artifact: artifact(forged.clone()), text: "Steve has logs.".into(), refs: forged });
    let v = turn(&app, &o.token, &run_id).await;
    assert_eq!(v["completion_status"], "blocked", "{v}");
    assert!(v.to_string().contains("required_evidence:shared_live_room_environment_probe"), "{v}");
    let req = app.executor.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(req.schema_version(), "helix.turn_request.v3");
    assert!(req.room_evidence.is_none(), "the run holds only the probe scope");
    let probe = req.room_probe.expect("the answered probe in the executor input");
    assert!(!probe.execution_enabled);
    assert_eq!(probe.room_id, o.room_id);
    assert_eq!(probe.capability, "com.casimirbot.minecraft.inventory.check");
    let a = &probe.answer;
    assert_eq!(a.provenance.probe_id.as_deref(), Some(probe.probe_id.as_str()));
    assert_eq!((a.provenance.source_id.as_str(), a.provenance.producer_epoch), (source_id.as_str(), 1));
    assert_eq!(a.data["inventory"]["players"][0]["items"][0]["count"], 12);
    assert!(!serde_json::to_string(&probe).unwrap().contains(&bearer));

    // The next turn queues a new probe; citing its answer completes the run.
    app.script(Step::CiteRoom { observations: true });
    let v = turn(&app, &o.token, &run_id).await;
    task.abort();
    assert_eq!(
        (v["completion_status"].as_str(), v["terminal_authority_status"].as_str()),
        (Some("completed"), Some("authorized")),
        "{v}"
    );
    assert_eq!(seen.lock().unwrap().probes.len(), 2, "one probe per turn");
}

async fn a_probe_is_seen_and_answered_by_its_own_source_only(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config("8000")).await;
    let o = owner(&app).await;
    let (_, bearer) = admitted_source(&app, &o, &o.room_id, "minecraft", "overworld").await;
    let other_room = app.room(&o.token, "Lab").await;
    let (_, other) = admitted_source(&app, &o, &other_room, "minecraft", "nether").await;
    let run_id = bound_run(&app, &o.token, &o.room_id, &[PROBE]).await;
    app.script(Step::CiteRoom { observations: true });

    let (token, id) = (o.token.clone(), run_id.clone());
    let (base, http) = (app.base.clone(), app.http.clone());
    let version = app.get(&format!("/api/v1/agent-runs/{run_id}"), &o.token).send().await.unwrap();
    let version = version.json::<Value>().await.unwrap()["version"].clone();
    let pending = tokio::spawn(async move {
        http.post(format!("{base}/api/v1/agent-runs/{id}/continue"))
            .bearer_auth(token)
            .header("Idempotency-Key", "probe-turn-own-source")
            .json(&json!({ "expected_version": version, "instruction": "Check the inventories." }))
            .send()
            .await
            .unwrap()
    });
    // The probe shows up in its own source's poll ...
    let probe_id = loop {
        let (status, list) = poll(&app, &bearer).await;
        assert_eq!(status, 200, "{list}");
        if let Some(p) = list["probes"].as_array().and_then(|a| a.first()) {
            break p["probe_id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // ... never in another source's, which cannot answer it either (404, as if it did not exist).
    let (status, list) = poll(&app, &other).await;
    assert_eq!((status, list["probes"].as_array().map(Vec::len)), (200, Some(0)), "{list}");
    let (status, err) = answer_probe(&app, &other, &probe_id, &answer("nether", "answer-other-0001")).await;
    assert_eq!((status, code(&err)), (404, "probe_not_found"), "{err}");
    assert_eq!(err["schema"], "helix.agent_api.error.v1", "{err}");
    let (status, unknown) =
        answer_probe(&app, &other, "prb_000000000000000000000000", &answer("nether", "answer-other-0002")).await;
    assert_eq!((status, code(&unknown)), (404, "probe_not_found"));
    assert_eq!(err["error"]["message"], unknown["error"]["message"], "same answer whether it exists or not");
    // No bearer, or a malformed answer, changes nothing.
    let (status, err) = read(
        app.http
            .post(format!("{}/api/ingress/room-sources/probes/{probe_id}/answer", app.base))
            .json(&answer("overworld", "answer-nobearer-01"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code(&err)), (401, "source_credential_invalid"));
    let mut bad = answer("overworld", "answer-bad-000001");
    bad["inventory"]["players"][0]["items"][0]["count"] = json!(0);
    let (status, err) = answer_probe(&app, &bearer, &probe_id, &bad).await;
    assert_eq!((status, code(&err)), (400, "invalid_request"), "{err}");
    let mut extra = answer("overworld", "answer-bad-000002");
    extra["command"] = json!("/give Steve diamond 64");
    let (status, err) = answer_probe(&app, &bearer, &probe_id, &extra).await;
    assert_eq!(status, 400, "unknown fields are refused: {err}");

    // Its own source answers (8 answers at once: exactly one is accepted); the turn goes on.
    let answers = (0..8).map(|i| {
        let (http, base, bearer, probe_id) = (app.http.clone(), app.base.clone(), bearer.clone(), probe_id.clone());
        tokio::spawn(async move {
            read(
                http.post(format!("{base}/api/ingress/room-sources/probes/{probe_id}/answer"))
                    .bearer_auth(bearer)
                    .json(&answer("overworld", &format!("answer-own-{i:06}")))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        })
    });
    let mut outcomes = vec![];
    for a in answers.collect::<Vec<_>>() {
        outcomes.push(a.await.unwrap());
    }
    let accepted: Vec<&Value> = outcomes.iter().filter(|(s, _)| *s == 202).map(|(_, v)| v).collect();
    assert_eq!(accepted.len(), 1, "{outcomes:?}");
    assert!(
        outcomes.iter().filter(|(s, _)| *s != 202).all(|(s, v)| (*s, code(v)) == (409, "probe_not_pending")),
        "{outcomes:?}"
    );
    let receipt = accepted[0].clone();
    let (status, v) = read(pending.await.unwrap()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["completion_status"], "completed", "{v}");
    let req = app.executor.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(req.room_probe.unwrap().answer.observation_ref, receipt["observation_ref"].as_str().unwrap());
}

async fn an_unanswered_probe_fails_the_turn_typed_and_closes(backend: Backend) {
    // The wait must outlast one producer poll on a loaded machine (the producer must see
    // the probe before it closes): 3 s, not the 600 ms the other tests can live with.
    let app = TestApp::spawn_with(backend, &config("3000")).await;
    let o = owner(&app).await;
    let (_, bearer) = admitted_source(&app, &o, &o.room_id, "minecraft", "overworld").await;
    let run_id = bound_run(&app, &o.token, &o.room_id, &[PROBE]).await;
    let (task, seen) = producer(&app, &bearer, "overworld", false);
    let v = turn(&app, &o.token, &run_id).await;
    task.abort();
    assert_eq!(v["completion_status"], "blocked", "{v}");
    assert_eq!(failure(&v), "room_probe_unanswered", "{v}");
    assert!(app.executor.seen.lock().unwrap().is_empty(), "no executor call without the answer");
    let probe_id = seen.lock().unwrap().probes.first().expect("the producer saw the probe")["probe_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Closed: no longer polled, and a late answer is refused.
    let (_, list) = poll(&app, &bearer).await;
    assert_eq!(list["probes"].as_array().map(Vec::len), Some(0), "{list}");
    let (status, err) = answer_probe(&app, &bearer, &probe_id, &answer("overworld", "answer-late-000001")).await;
    assert_eq!((status, code(&err)), (409, "probe_not_pending"), "{err}");
    assert_eq!(err["error"]["details"]["reason"], "expired", "{err}");
}

async fn a_probe_needs_the_binding_and_exactly_one_paired_source(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config("600")).await;
    let o = owner(&app).await;
    // No binding at all.
    let unbound = app.started(&o.token, json!({ "objective": "x", "database_scope": [PROBE] })).await;
    let v = turn(&app, &o.token, unbound["run_id"].as_str().unwrap()).await;
    assert_eq!(failure(&v), "room_binding_missing", "{v}");
    // Bound, but the room has no source; then only a fixture source (it answers no probes).
    let run_id = bound_run(&app, &o.token, &o.room_id, &[PROBE]).await;
    assert_eq!(failure(&turn(&app, &o.token, &run_id).await), "room_source_not_admitted");
    admitted_source(&app, &o, &o.room_id, "fixture", "bench").await;
    assert_eq!(failure(&turn(&app, &o.token, &run_id).await), "room_source_not_admitted");
    // One minecraft source admitted: the probe is queued (and, unanswered here, typed).
    let (_, first) = admitted_source(&app, &o, &o.room_id, "minecraft", "overworld").await;
    assert_eq!(failure(&turn(&app, &o.token, &run_id).await), "room_probe_unanswered");
    // Two: which one would answer is ambiguous, so none is asked.
    let (_, second) = admitted_source(&app, &o, &o.room_id, "minecraft", "overworld-2").await;
    assert_eq!(failure(&turn(&app, &o.token, &run_id).await), "room_probe_source_ambiguous");
    for bearer in [first, second] {
        let (_, list) = poll(&app, &bearer).await;
        assert_eq!(list["probes"].as_array().map(Vec::len), Some(0), "{list}");
    }
    assert!(app.executor.seen.lock().unwrap().is_empty(), "no turn reached the executor");
}

async fn with_both_room_scopes_each_fed_family_needs_its_own_refs(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config("8000")).await;
    let o = owner(&app).await;
    let (_, bearer) = admitted_source(&app, &o, &o.room_id, "minecraft", "overworld").await;
    let (status, v) = app.ingress(&bearer, "observations", &batch("overworld", 1, &["tick-0001"], 0)).await;
    assert_eq!(status, 202, "{v}");
    let run_id = bound_run(&app, &o.token, &o.room_id, &[PROBE, "bound_room_evidence"]).await;
    let (task, _) = producer(&app, &bearer, "overworld", true);
    // Both families named, only the probe answer cited: the evidence family stays open.
    app.script(Step::CiteRoom { observations: false });
    let v = turn(&app, &o.token, &run_id).await;
    assert_eq!(v["completion_status"], "blocked", "{v}");
    let open = v["unresolved_requirements"].to_string();
    assert!(open.contains("required_evidence:shared_live_room_evidence"), "{v}");
    assert!(!open.contains("required_evidence:shared_live_room_environment_probe"), "{v}");
    let req = app.executor.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(req.schema_version(), "helix.turn_request.v3");
    assert_eq!(req.room_evidence.as_ref().map(|e| e.observations.len()), Some(1));
    assert!(req.room_probe.is_some());
    // Both cited: completed with verified authority.
    app.script(Step::CiteRoom { observations: true });
    let v = turn(&app, &o.token, &run_id).await;
    task.abort();
    assert_eq!(
        (v["completion_status"].as_str(), v["terminal_authority_status"].as_str()),
        (Some("completed"), Some("authorized")),
        "{v}"
    );
}

async fn a_cancel_stops_the_probe_wait_and_closes_the_probe(backend: Backend) {
    let app = TestApp::spawn_with(backend, &config("20000")).await;
    let o = owner(&app).await;
    let (_, bearer) = admitted_source(&app, &o, &o.room_id, "minecraft", "overworld").await;
    let run_id = bound_run(&app, &o.token, &o.room_id, &[PROBE]).await;
    let (token, id) = (o.token.clone(), run_id.clone());
    let (base, http) = (app.base.clone(), app.http.clone());
    let started = std::time::Instant::now();
    let pending = tokio::spawn(async move {
        http.post(format!("{base}/api/v1/agent-runs/{id}/continue"))
            .bearer_auth(token)
            .header("Idempotency-Key", "probe-turn-cancelled")
            .json(&json!({ "expected_version": 1, "instruction": "Check the inventories." }))
            .send()
            .await
            .unwrap()
    });
    let probe_id = loop {
        let (_, list) = poll(&app, &bearer).await;
        if let Some(p) = list["probes"].as_array().and_then(|a| a.first()) {
            break p["probe_id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (status, v) =
        read(app.cancel(&o.token, &run_id, "probe-cancel-0001", json!({ "expected_version": 1 })).await).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = read(pending.await.unwrap()).await;
    assert!(started.elapsed() < Duration::from_secs(15), "the cancel ended the 20 s wait early");
    assert_eq!((status, code(&v)), (409, "run_not_continuable"), "{v}");
    assert!(app.executor.seen.lock().unwrap().is_empty(), "no executor call after the cancel");
    let (_, list) = poll(&app, &bearer).await;
    assert_eq!(list["probes"].as_array().map(Vec::len), Some(0), "closed: {list}");
    let (status, err) = answer_probe(&app, &bearer, &probe_id, &answer("overworld", "answer-cancel-0001")).await;
    assert_eq!((status, code(&err)), (409, "probe_not_pending"), "{err}");
}

on_both_backends!(
    a_probe_run_completes_on_the_answer_of_its_paired_source,
    the_executor_gets_the_probe_and_the_family_needs_its_ref,
    a_probe_is_seen_and_answered_by_its_own_source_only,
    an_unanswered_probe_fails_the_turn_typed_and_closes,
    a_probe_needs_the_binding_and_exactly_one_paired_source,
    with_both_room_scopes_each_fed_family_needs_its_own_refs,
    a_cancel_stops_the_probe_wait_and_closes_the_probe,
);
