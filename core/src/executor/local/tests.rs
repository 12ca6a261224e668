//! The local executor's test helpers (the sample corpus, a turn request) and the
//! tests of the executor seam itself.

use std::path::{Path, PathBuf};

use chrono::{Duration, Utc};
use serde_json::json;

use super::*;
use crate::domain::run::Answer;
use crate::domain::source::PROBE_CAPABILITY;

pub(super) fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus")
}

pub(super) fn signer() -> TerminalSigner {
    TerminalSigner::from_seed("helix-local", "local-1", [3; 32])
}

pub(super) fn executor() -> LocalExecutor {
    LocalExecutor::from_dir(corpus_dir(), signer()).expect("sample corpus loads")
}

pub(crate) fn request(objective: &str, instruction: Option<&str>, answers: Vec<Answer>) -> TurnRequest {
    TurnRequest {
        schema: crate::executor::TURN_REQUEST_SCHEMA.into(),
        mode: crate::executor::TurnMode::Read,
        run_id: "run_localtest01".into(),
        step: 1,
        claim_token: "claim-abc".into(),
        objective: objective.into(),
        constraints: vec![],
        instruction: instruction.map(Into::into),
        answers,
        capabilities: vec![CAPABILITY.into()],
        required_evidence_families: vec![EVIDENCE_FAMILY.into()],
        prior_evidence_refs: vec![],
        deadline: Utc::now() + Duration::seconds(30),
        room_evidence: None,
        room_probe: None,
        conversation_context: None,
    }
}

pub(super) async fn run(ex: &LocalExecutor, req: TurnRequest) -> TurnArtifact {
    ex.execute(req, CancellationToken::new()).await.expect("local turns produce an artifact")
}

pub(super) fn probe_input() -> crate::domain::source::RoomProbeInput {
    serde_json::from_value(json!({
        "probe_id": "prb_0123456789abcdef01234567",
        "capability": PROBE_CAPABILITY,
        "room_id": "room_0123456789abcdef0123",
        "binding_ref": "rrb_0123",
        "execution_enabled": false,
        "answer": {
            "observation_ref": "obsv_0123456789abcdef01234567",
            "kind": "snapshot",
            "event": null,
            "summary": "overworld: 1 player online",
            "data": { "capability": PROBE_CAPABILITY, "inventory": { "players": [
                { "player": "Steve", "items": [ { "item": "minecraft:oak_log", "count": 12 } ] } ] } },
            "content_sha256": "00",
            "provenance": {
                "source_id": "src_0123456789abcdef0123", "room_id": "room_0123456789abcdef0123",
                "world_id": "overworld", "adapter_profile": "minecraft", "adapter_version": "1.0.0",
                "adapter_hash": "sha256:00", "manifest_hash": "sha256:00", "producer_epoch": 1,
                "request_id": "answer-0001", "observed_at": "2026-11-30T10:00:00Z",
                "received_at": "2026-11-30T10:00:00Z", "probe_id": "prb_0123456789abcdef01234567"
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn cancellation_or_a_passed_deadline_stops_before_work() {
    let ex = executor();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let req = request("sphere plate", None, vec![]);
    assert_eq!(ex.execute(req.clone(), cancel).await, Err(TurnFailure::TurnTimeout));
    let mut late = req;
    late.deadline = Utc::now() - Duration::seconds(1);
    assert_eq!(ex.execute(late, CancellationToken::new()).await, Err(TurnFailure::TurnTimeout));
}
