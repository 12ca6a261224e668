//! The local executor end to end through the service's re-entry rules: its artifacts
//! satisfy the research_library evidence gate, its terminal candidates verify with the
//! key the local server trusts, and a pending question's answer narrows the next turn.
#![cfg(feature = "local-executor")]

use std::path::{Path, PathBuf};

use chrono::{Duration, Utc};
use helix_core::domain::authority::{TerminalSigner, TrustedKeys};
use helix_core::domain::event::EventLog;
use helix_core::domain::ids::RunId;
use helix_core::domain::run::{Answer, Authority, Completion, Ownership, Run, StartRequest};
use helix_core::domain::turn::{SolverStatus, TurnContext, TurnFailure, apply_turn};
use helix_core::executor::local::{CAPABILITY, CorpusError, EVIDENCE_FAMILY, LocalExecutor};
use helix_core::executor::{TURN_REQUEST_SCHEMA, TurnExecutor, TurnRequest};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const ISSUER: &str = "helix-local";
const KEY_ID: &str = "local-test";

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus")
}

fn signer() -> TerminalSigner {
    TerminalSigner::from_seed(ISSUER, KEY_ID, [11; 32])
}

/// The server side: trusts exactly the local signer's public key.
fn trusted(ex: &LocalExecutor) -> TrustedKeys {
    let mut keys = TrustedKeys::default();
    keys.insert(&ex.signer().issuer, &ex.signer().key_id, ex.signer().verifying_key());
    keys
}

fn new_run(objective: &str) -> Run {
    let start: StartRequest = serde_json::from_value(json!({
        "objective": objective,
        "database_scope": ["research_library"],
        "completion_contract": { "required_output_fields": ["text", "supporting_evidence_refs"] }
    }))
    .unwrap();
    let spec = start.validate().unwrap();
    let ownership =
        Ownership { owner_ref: "owner:t".into(), tenant_ref: "tenant:t".into(), account_ref: "account:t".into() };
    Run::new(
        &RunId::parse("run_localflow01").unwrap(),
        "owner-hash".into(),
        ownership,
        spec,
        &[EVIDENCE_FAMILY],
        Utc::now(),
    )
}

/// One turn as the service runs it: request from the run, execute, re-enter.
async fn turn(
    ex: &LocalExecutor,
    run: &mut Run,
    instruction: Option<&str>,
    answers: Vec<Answer>,
    capabilities: &[&str],
) {
    let step = run.budget.steps_used + 1;
    let claim_token = format!("claim-{step}");
    let request = TurnRequest {
        schema: TURN_REQUEST_SCHEMA.into(),
        mode: helix_core::executor::TurnMode::Read,
        run_id: run.run_id.clone(),
        step,
        claim_token: claim_token.clone(),
        objective: run.objective.clone(),
        constraints: run.constraints.clone(),
        instruction: instruction.map(Into::into),
        answers: answers.clone(),
        capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
        required_evidence_families: vec![EVIDENCE_FAMILY.into()],
        prior_evidence_refs: run.evidence.evidence_refs.clone(),
        deadline: Utc::now() + Duration::seconds(20),
        room_evidence: None,
        room_probe: None,
        conversation_context: None,
    };
    let outcome = ex.execute(request, CancellationToken::new()).await;
    let required = vec![EVIDENCE_FAMILY.to_string()];
    let ctx = TurnContext {
        step,
        claim_token: &claim_token,
        instruction,
        answers: &answers,
        required_families: &required,
        family_refs: &[],
        recovered: false,
        now: Utc::now(),
    };
    let mut log = EventLog::after(&run.run_id, run.last_seq, ctx.now);
    apply_turn(run, &ctx, outcome, &trusted(ex), &mut log);
    run.last_seq = log.last_seq();
}

#[tokio::test]
async fn a_corpus_question_completes_with_verified_terminal_authority() {
    let ex = LocalExecutor::from_dir(corpus_dir(), signer()).unwrap();
    let mut run =
        new_run("How does the proximity force approximation give the Casimir force between a sphere and a plate?");
    turn(&ex, &mut run, Some("Cite the library."), vec![], &[CAPABILITY]).await;

    assert_eq!(run.completion_status, Completion::Completed, "{:?}", run.unresolved_requirements);
    assert_eq!(run.terminal_authority_status, Authority::Authorized);
    assert!(run.unresolved_requirements.is_empty());
    let result = run.latest_result.as_ref().unwrap();
    assert_eq!(result.solver_status, SolverStatus::Succeeded);
    let product = result.terminal_product.as_ref().expect("an authorized terminal product");
    assert!(!product.supporting_evidence_refs.is_empty());
    assert!(product.supporting_evidence_refs.iter().all(|r| run.evidence.evidence_refs.contains(r)));
    assert!(product.supporting_evidence_refs.iter().all(|r| product.text.contains(r.as_str())));
    let first = &run.evidence_items[0];
    assert!(
        first.source.starts_with("research-library://sphere-plate-proximity-force-approximation.md#p"),
        "{first:?}"
    );
    assert_eq!(first.family, EVIDENCE_FAMILY);
    assert_eq!(first.content_sha256.len(), 64);
}

#[tokio::test]
async fn a_question_then_its_answer_narrows_and_completes() {
    let ex = LocalExecutor::from_dir(corpus_dir(), signer()).unwrap();
    let mut run = new_run("Plan a weekend trip to the mountains with good hiking");
    turn(&ex, &mut run, None, vec![], &[CAPABILITY]).await;
    assert_eq!(run.completion_status, Completion::NeedsInput);
    assert_eq!(run.pending_questions.len(), 1);
    assert_eq!(run.pending_questions[0].question_id, "q_step1_focus");
    assert!(run.evidence_items.is_empty());

    let answer = Answer { question_id: "q_step1_focus".into(), value: json!("stiction in MEMS devices") };
    turn(&ex, &mut run, None, vec![answer], &[CAPABILITY]).await;
    assert!(run.pending_questions.is_empty());
    assert_eq!(run.completion_status, Completion::Completed, "{:?}", run.latest_result);
    assert_eq!(run.terminal_authority_status, Authority::Authorized);
    assert!(run.evidence_items[0].source.contains("mems-and-stiction.md"), "{:?}", run.evidence_items);
}

#[tokio::test]
async fn without_the_capability_the_gate_stays_closed() {
    let ex = LocalExecutor::from_dir(corpus_dir(), signer()).unwrap();
    let mut run = new_run("What is the Lifshitz theory?");
    turn(&ex, &mut run, None, vec![], &["internet-search.search_web"]).await;
    assert_ne!(run.completion_status, Completion::Completed);
    let ids: Vec<&str> = run.unresolved_requirements.iter().map(|r| r.id.as_str()).collect();
    assert!(ids.contains(&"capability:research-library.read_document"), "{ids:?}");
    assert!(ids.contains(&"required_evidence:research_library_evidence"), "{ids:?}");
    assert_eq!(run.latest_result.as_ref().unwrap().solver_status, SolverStatus::Partial);

    // Admitted on the next turn: the capability requirement is resolved and the run completes.
    turn(&ex, &mut run, Some("Now with the library."), vec![], &[CAPABILITY]).await;
    assert_eq!(run.completion_status, Completion::Completed, "{:?}", run.unresolved_requirements);
}

#[tokio::test]
async fn a_candidate_signed_by_another_local_key_is_rejected() {
    let ex = LocalExecutor::from_dir(corpus_dir(), signer()).unwrap();
    let impostor = LocalExecutor::from_dir(corpus_dir(), TerminalSigner::from_seed(ISSUER, KEY_ID, [12; 32])).unwrap();
    let request = TurnRequest {
        schema: TURN_REQUEST_SCHEMA.into(),
        mode: helix_core::executor::TurnMode::Read,
        run_id: "run_localflow02".into(),
        step: 1,
        claim_token: "claim-1".into(),
        objective: "thermal Casimir force Drude plasma".into(),
        constraints: vec![],
        instruction: None,
        answers: vec![],
        capabilities: vec![CAPABILITY.into()],
        required_evidence_families: vec![EVIDENCE_FAMILY.into()],
        prior_evidence_refs: vec![],
        deadline: Utc::now() + Duration::seconds(20),
        room_evidence: None,
        room_probe: None,
        conversation_context: None,
    };
    let a = impostor.execute(request.clone(), CancellationToken::new()).await.unwrap();
    assert_eq!(a.solver_status, SolverStatus::Succeeded);
    let c = a.terminal_candidate.unwrap();
    let refs: Vec<String> = a.evidence.iter().map(|e| e.reference.clone()).collect();
    assert!(trusted(&ex).verify(&c, &request.run_id, 1, "claim-1", &refs).is_err());
    assert_eq!(trusted(&impostor).verify(&c, &request.run_id, 1, "claim-1", &refs), Ok(()));
}

#[tokio::test]
async fn embedded_documents_give_the_same_evidence_as_the_directory() {
    let mut docs: Vec<(String, String)> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    docs.sort();
    assert!((8..=12).contains(&docs.len()), "the sample corpus has 8-12 documents");
    for (name, text) in &docs {
        assert!(text.starts_with("# "), "{name} starts with a title");
        let words = text.split_whitespace().count();
        assert!((300..=650).contains(&words), "{name}: {words} words");
    }
    let embedded = LocalExecutor::from_documents(docs, signer());
    let dir = LocalExecutor::from_dir(corpus_dir(), signer()).unwrap();
    assert_eq!(embedded.passage_count(), dir.passage_count());
    let request = TurnRequest {
        schema: TURN_REQUEST_SCHEMA.into(),
        mode: helix_core::executor::TurnMode::Read,
        run_id: "run_localflow03".into(),
        step: 2,
        claim_token: "claim-2".into(),
        objective: "Mohideen and Roy atomic force microscope".into(),
        constraints: vec![],
        instruction: None,
        answers: vec![],
        capabilities: vec![CAPABILITY.into()],
        required_evidence_families: vec![],
        prior_evidence_refs: vec![],
        deadline: Utc::now() + Duration::seconds(20),
        room_evidence: None,
        room_probe: None,
        conversation_context: None,
    };
    let a = embedded.execute(request.clone(), CancellationToken::new()).await.unwrap();
    let b = dir.execute(request, CancellationToken::new()).await.unwrap();
    assert_eq!(a.evidence, b.evidence);
    assert!(a.evidence[0].source.contains("mohideen-roy-afm-measurements.md"));
}

#[test]
fn a_missing_or_empty_corpus_directory_is_a_typed_error() {
    assert!(matches!(LocalExecutor::from_dir("/definitely/not/here", signer()), Err(CorpusError::Io { .. })));
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(LocalExecutor::from_dir(empty.path(), signer()), Err(CorpusError::Empty)));
    std::fs::write(empty.path().join("notes.md"), "# Notes\n\nThe Casimir effect is an attraction.\n").unwrap();
    assert_eq!(LocalExecutor::from_dir(empty.path(), signer()).unwrap().passage_count(), 1);
}

#[tokio::test]
async fn a_cancelled_turn_is_a_timeout_failure() {
    let ex = LocalExecutor::from_dir(corpus_dir(), signer()).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let request = TurnRequest {
        schema: TURN_REQUEST_SCHEMA.into(),
        mode: helix_core::executor::TurnMode::Read,
        run_id: "run_localflow04".into(),
        step: 1,
        claim_token: "c".into(),
        objective: "Casimir".into(),
        constraints: vec![],
        instruction: None,
        answers: vec![],
        capabilities: vec![CAPABILITY.into()],
        required_evidence_families: vec![],
        prior_evidence_refs: vec![],
        deadline: Utc::now() + Duration::seconds(20),
        room_evidence: None,
        room_probe: None,
        conversation_context: None,
    };
    assert_eq!(ex.execute(request, cancel).await, Err(TurnFailure::TurnTimeout));
}
