//! What a turn may not do, over real HTTP: read mode (every catalog capability and
//! evidence family outside the admitted set is refused), the confirmation-governed room
//! mutation a turn asks for (no approval host: `runtime_approval_host_unconfigured` and
//! nothing mutated; a verified receipt for exactly that turn proceeds once; a replayed or
//! wrong-turn receipt is refused, on both store backends), and developer privileges in
//! production (policy flag, developer-profile allowlist and developer scope, all three).

use helix_core::domain::approval::{APPROVAL_KEYS_VAR, ApprovalSigner, RoomMutationKind, RoomMutationRequest};
use helix_core::domain::scopes::CATALOG;
use helix_core::domain::turn::TurnArtifact;
use helix_core::executor::scripted::{Approval, Step};
use helix_core::service::records::rooms::read_binding;
use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::support::runs::failure;
use helix_integration_tests::*;
use serde_json::json;

fn host() -> ApprovalSigner {
    ApprovalSigner::from_seed("workstation-host", "k1", [11; 32])
}

/// A partial turn that asks for nothing else than its mutation.
fn asking() -> TurnArtifact {
    serde_json::from_value(json!({ "solver_status": "partial", "summary": "asks to withdraw the binding" })).unwrap()
}

fn withdraw(binding_ref: &str) -> RoomMutationRequest {
    RoomMutationRequest {
        kind: RoomMutationKind::WithdrawRunRoomBinding,
        binding_ref: binding_ref.into(),
        approval_receipt: None,
    }
}

fn approved(receipt_id: &str, step: Option<u32>) -> Option<Box<Approval>> {
    Some(Box::new(Approval { signer: host(), receipt_id: receipt_id.into(), step, mutation: None }))
}

/// alice's token, a room and a research run bound to it: (token, run_id, binding_ref).
async fn bound_run(app: &TestApp) -> (String, String, String) {
    let token = app.token_for("alice", "tenant-a", ALL).await;
    let room_id = app.room(&token, "Lab").await;
    let run =
        app.started(&token, json!({ "objective": "Watch the lab.", "database_scope": ["research_library"] })).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let binding_ref = bind(app, &token, &room_id, &run_id).await;
    (token, run_id, binding_ref)
}

async fn bind(app: &TestApp, token: &str, room_id: &str, run_id: &str) -> String {
    let (status, v) = app.bind(token, room_id, run_id).await;
    assert_eq!(status, 201, "{v}");
    v["binding_ref"].as_str().unwrap().to_owned()
}

async fn active(app: &TestApp, binding_ref: &str) -> bool {
    read_binding(&*app.state.services.store, binding_ref).await.unwrap().unwrap().is_active()
}

async fn turn_asking(
    app: &TestApp,
    token: &str,
    run_id: &str,
    m: RoomMutationRequest,
    a: Option<Box<Approval>>,
) -> String {
    app.script(Step::Mutating { artifact: asking(), mutation: m, approval: a });
    failure(&app.turn_with(token, run_id, "withdraw the room binding").await).to_owned()
}

async fn without_an_approval_host_a_governed_mutation_is_the_typed_limitation(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, run_id, binding_ref) = bound_run(&app).await;
    // Even a well-signed receipt is nothing without a configured host to verify it.
    for approval in [None, approved("r-1", None)] {
        let code = turn_asking(&app, &token, &run_id, withdraw(&binding_ref), approval).await;
        assert_eq!(code, "runtime_approval_host_unconfigured");
        assert!(active(&app, &binding_ref).await, "nothing is mutated");
    }
    let run = app.get(&format!("/api/v1/agent-runs/{run_id}"), &token).send().await.unwrap();
    let run: serde_json::Value = run.json().await.unwrap();
    assert_eq!(run["lifecycle_status"], "waiting");
    assert!(run["unresolved_requirements"].to_string().contains("turn_failure:runtime_approval_host_unconfigured"));
}

async fn a_verified_receipt_for_exactly_that_turn_proceeds_once(backend: Backend) {
    let registry = json!([host().registry_entry()]).to_string();
    let app = TestApp::spawn_with(backend, &[(APPROVAL_KEYS_VAR, registry.as_str())]).await;
    let (token, run_id, binding_ref) = bound_run(&app).await;

    // A configured host, but no receipt: refused, nothing mutated.
    let code = turn_asking(&app, &token, &run_id, withdraw(&binding_ref), None).await;
    assert_eq!(code, "runtime_approval_receipt_missing");
    assert!(active(&app, &binding_ref).await);
    // A receipt signed for another step (the wrong turn): refused, nothing mutated.
    let code = turn_asking(&app, &token, &run_id, withdraw(&binding_ref), approved("r-0", Some(99))).await;
    assert_eq!(code, "runtime_approval_receipt_invalid");
    assert!(active(&app, &binding_ref).await);
    // A receipt for this turn but for another mutation (another binding): refused.
    let other = withdraw("rrb_0000000000000000000000000000000000000000000000000000000000000000");
    let swapped = Approval { signer: host(), receipt_id: "r-0b".into(), step: None, mutation: Some(other) };
    let code = turn_asking(&app, &token, &run_id, withdraw(&binding_ref), Some(Box::new(swapped))).await;
    assert_eq!(code, "runtime_approval_receipt_invalid");
    assert!(active(&app, &binding_ref).await);

    // The verified receipt for this turn and this mutation: the binding is withdrawn.
    let code = turn_asking(&app, &token, &run_id, withdraw(&binding_ref), approved("r-1", None)).await;
    assert_eq!(code, "", "the approved turn proceeds");
    assert!(!active(&app, &binding_ref).await, "the approved mutation is applied");

    // The same receipt id again, correctly signed for a later turn and a new binding:
    // the one-time ledger refuses it, and nothing is mutated.
    let room_id = read_binding(&*app.state.services.store, &binding_ref).await.unwrap().unwrap();
    let room_id = match room_id.target {
        helix_core::service::records::rooms::BindingTarget::Room { room_id, .. } => room_id,
        _ => unreachable!("a run-room binding"),
    };
    let again = bind(&app, &token, &room_id, &run_id).await;
    let code = turn_asking(&app, &token, &run_id, withdraw(&again), approved("r-1", None)).await;
    assert_eq!(code, "runtime_approval_receipt_replayed");
    assert!(active(&app, &again).await, "a replayed receipt mutates nothing");
}

// ----------------------------------------------------------------------------- read mode

/// A research_library run: every other catalog family and capability is outside its set.
#[tokio::test]
async fn read_mode_refuses_every_capability_and_family_outside_the_admitted_set() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let body = json!({ "objective": "Summarize the measured force.", "database_scope": ["research_library"],
                       "budget": { "max_steps": 64 } });
    let run = app.started(&token, body).await;
    let run_id = run["run_id"].as_str().unwrap();
    let admitted = CATALOG.iter().find(|s| s.id == "research_library").unwrap();
    let turn = |artifact: serde_json::Value| {
        app.script(Step::Artifact(serde_json::from_value(artifact).unwrap()));
        app.turn_with(&token, run_id, "go on")
    };
    for scope in CATALOG.iter().filter(|s| s.id != admitted.id) {
        let f = scope.evidence_family;
        let cited = json!({ "solver_status": "succeeded", "summary": "s", "evidence": [
            { "ref": format!("ev:{f}"), "family": f, "source": "x://y", "content_sha256": "00" } ] });
        assert_eq!(failure(&turn(cited).await), "evidence_family_not_admitted", "{f} on an evidence item");
        let named = json!({ "solver_status": "succeeded", "summary": "s", "satisfied_evidence_families": [f] });
        assert_eq!(failure(&turn(named).await), "evidence_family_not_admitted", "{f} named satisfied");
        for cap in scope.capabilities {
            let called = json!({ "solver_status": "succeeded", "summary": "s", "capabilities_used": [cap] });
            assert_eq!(failure(&turn(called).await), "capability_not_admitted", "{cap}");
        }
    }
    // Within the admitted set the turn re-enters as before.
    let ok = json!({ "solver_status": "partial", "summary": "s", "capabilities_used": admitted.capabilities,
                     "satisfied_evidence_families": [admitted.evidence_family] });
    assert_eq!(failure(&turn(ok).await), "");
    let seen = app.executor.seen.lock().unwrap();
    let request = serde_json::to_value(seen.last().unwrap()).unwrap();
    assert_eq!(request["mode"], "read", "the turn request declares read mode");
    assert_eq!(request["capabilities"], json!(admitted.capabilities));
}

// ------------------------------------------------------------- developer privileges in production

/// A production server over real HTTP: production mode and a developer-profile allowlist
/// naming only alice, with requests arriving as from a trusted TLS proxy.
async fn production(backend: Backend) -> TestApp {
    let alice = helix_core::domain::account::account_id_for("helix-local", "alice");
    TestApp::spawn_tuned(
        backend,
        &[("TRUST_PROXY", "loopback"), ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com")],
        |c| {
            c.mode = helix_core::config::Mode::Production;
            c.developer_profiles = vec![alice];
        },
    )
    .await
}

async fn create_source_in_production(app: &TestApp, token: &str) -> (u16, serde_json::Value) {
    let post = |path: String| {
        app.http
            .post(format!("{}{path}", app.base))
            .bearer_auth(token)
            .header("host", "api.example.com")
            .header("x-forwarded-proto", "https")
            .header("idempotency-key", format!("key-{}", helix_core::domain::random_hex(6)))
    };
    let (status, room) = read(post("/api/v1/rooms".into()).json(&json!({ "name": "Lab" })).send().await.unwrap()).await;
    assert_eq!(status, 201, "{room}");
    let path = format!("/api/v1/rooms/{}/sources", room["room_id"].as_str().unwrap());
    let body = json!({ "adapter_profile": "minecraft", "world_id": "overworld" });
    read(post(path).json(&body).send().await.unwrap()).await
}

async fn production_developer_privileges_need_flag_allowlist_and_scope(backend: Backend) {
    let app = production(backend).await;
    assert_eq!(app.state.services.config.oauth.provider, "helix-local", "the allowlisted account id's provider");
    let sources = helix_integration_tests::support::sources::ALL;
    let with_scope: Vec<&str> = sources.iter().copied().chain(["helix.developer"]).collect();
    // alice: flag and allowlist, but no developer scope on the bearer.
    let token = app.token_for("alice", "tenant-a", sources).await;
    let bob = app.token_for("bob", "tenant-a", &with_scope).await;
    for who in ["alice", "bob"] {
        app.developer(who).await;
    }
    let (status, v) = create_source_in_production(&app, &token).await;
    assert_eq!((status, code(&v)), (403, "insufficient_scope"), "{v}");
    // One challenge names both scopes the create needs in production.
    assert_eq!(
        v["error"]["details"]["required_scopes"],
        json!(["helix.room_sources.manage", "helix.developer"]),
        "{v}"
    );
    // bob: flag and scope, but not on the developer-profile allowlist.
    let (status, v) = create_source_in_production(&app, &bob).await;
    assert_eq!((status, code(&v)), (403, "developer_required"), "{v}");
    // alice with all three.
    let token = app.token_for("alice", "tenant-a", &with_scope).await;
    let (status, v) = create_source_in_production(&app, &token).await;
    assert_eq!(status, 201, "{v}");
    // The operator's flag is still required.
    app.set_policy("alice", helix_core::domain::account::PolicyChange { developer: Some(false), ..Default::default() })
        .await;
    let (status, v) = create_source_in_production(&app, &token).await;
    assert_eq!((status, code(&v)), (403, "developer_required"), "{v}");
}

on_both_backends!(
    without_an_approval_host_a_governed_mutation_is_the_typed_limitation,
    a_verified_receipt_for_exactly_that_turn_proceeds_once,
    production_developer_privileges_need_flag_allowlist_and_scope,
);
