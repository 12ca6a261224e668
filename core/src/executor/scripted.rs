//! Test executor: replays scripted steps (artifacts, failures, delays) in order, and
//! records the requests it saw. A step may sign its terminal candidate with the
//! request's run id, step and claim token, as a real solver would.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{TurnExecutor, TurnRequest};
use crate::domain::approval::{ApprovalSigner, RoomMutationRequest, TurnBinding};
use crate::domain::authority::TerminalSigner;
use crate::domain::turn::{TurnArtifact, TurnFailure};

pub enum Step {
    Artifact(TurnArtifact),
    /// The artifact plus a terminal candidate signed for this exact turn.
    Signed {
        artifact: TurnArtifact,
        text: String,
        refs: Vec<String>,
    },
    Fail(TurnFailure),
    /// What a solver does with room data it cannot know in advance: cites the request's
    /// answered environment probe (if any) and, when `observations`, its bound-room
    /// observations, names the family of each lane the request carries, and signs a
    /// terminal candidate on the cited refs.
    CiteRoom {
        observations: bool,
    },
    /// The artifact asking for `mutation`, with a receipt signed by `approval` (when
    /// given) for this exact turn, as an approval host would pass it through the seam.
    Mutating {
        artifact: TurnArtifact,
        mutation: RoomMutationRequest,
        approval: Option<Box<Approval>>,
    },
    /// Waits (cancellable) before answering with the inner step.
    Delay(Duration, Box<Step>),
}

/// How a scripted approval host signs: its key, the receipt id, and optionally another
/// step than the request's (a receipt for the wrong turn) or another mutation than the
/// one asked for.
pub struct Approval {
    pub signer: ApprovalSigner,
    pub receipt_id: String,
    pub step: Option<u32>,
    pub mutation: Option<RoomMutationRequest>,
}

pub struct ScriptedExecutor {
    steps: Mutex<VecDeque<Step>>,
    signer: Option<TerminalSigner>,
    pub seen: Mutex<Vec<TurnRequest>>,
}

impl ScriptedExecutor {
    pub fn new(steps: Vec<Step>, signer: Option<TerminalSigner>) -> Self {
        Self { steps: Mutex::new(steps.into()), signer, seen: Mutex::new(vec![]) }
    }

    pub fn push(&self, step: Step) {
        self.steps.lock().unwrap().push_back(step);
    }

    fn resolve(&self, step: Step, req: &TurnRequest) -> Result<TurnArtifact, TurnFailure> {
        match step {
            Step::Artifact(a) => Ok(a),
            Step::Fail(f) => Err(f),
            Step::Signed { mut artifact, text, refs } => {
                let signer = self.signer.as_ref().expect("a Signed step needs a signer");
                artifact.terminal_candidate = Some(signer.sign(&req.run_id, req.step, &req.claim_token, &text, refs));
                Ok(artifact)
            }
            Step::CiteRoom { observations } => {
                use crate::domain::source::{PROBE_FAMILY, ROOM_EVIDENCE_FAMILY};
                let mut cited: Vec<(String, &str, String, String)> = vec![];
                let mut families = vec![];
                if let Some(p) = &req.room_probe {
                    families.push(PROBE_FAMILY);
                    let a = &p.answer;
                    cited.push((a.observation_ref.clone(), PROBE_FAMILY, a.content_sha256.clone(), a.summary.clone()));
                }
                if let Some(ev) = &req.room_evidence {
                    families.push(ROOM_EVIDENCE_FAMILY);
                    if observations {
                        cited.extend(ev.observations.iter().map(|o| {
                            (
                                o.observation_ref.clone(),
                                ROOM_EVIDENCE_FAMILY,
                                o.content_sha256.clone(),
                                o.summary.clone(),
                            )
                        }));
                    }
                }
                let refs: Vec<String> = cited.iter().map(|c| c.0.clone()).collect();
                let evidence: Vec<serde_json::Value> = cited
                    .iter()
                    .map(|(r, f, sha, text)| {
                        serde_json::json!({ "ref": r, "family": f, "source": "room", "content_sha256": sha, "excerpt": text })
                    })
                    .collect();
                let artifact: TurnArtifact = serde_json::from_value(serde_json::json!({
                    "solver_status": "succeeded",
                    "summary": "read the room",
                    "observation_refs": refs,
                    "evidence": evidence,
                    "satisfied_evidence_families": families,
                }))
                .map_err(|_| TurnFailure::ExecutorInvalidResponse)?;
                let text = cited.iter().map(|c| c.3.as_str()).collect::<Vec<_>>().join(" ");
                self.resolve(Step::Signed { artifact, text, refs }, req)
            }
            Step::Mutating { mut artifact, mut mutation, approval } => {
                if let Some(a) = approval {
                    let step = a.step.unwrap_or(req.step);
                    let turn = TurnBinding { run_id: &req.run_id, step, claim_token: &req.claim_token };
                    let signed = a.mutation.as_ref().unwrap_or(&mutation);
                    mutation.approval_receipt = Some(a.signer.sign(turn, signed, &a.receipt_id));
                }
                artifact.room_mutation = Some(mutation);
                Ok(artifact)
            }
            Step::Delay(..) => unreachable!("delays are unwrapped by execute"),
        }
    }
}

#[async_trait]
impl TurnExecutor for ScriptedExecutor {
    async fn execute(&self, req: TurnRequest, cancel: CancellationToken) -> Result<TurnArtifact, TurnFailure> {
        self.seen.lock().unwrap().push(req.clone());
        let mut step = self.steps.lock().unwrap().pop_front().unwrap_or(Step::Fail(TurnFailure::ExecutorUnavailable));
        while let Step::Delay(d, inner) = step {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = cancel.cancelled() => return Err(TurnFailure::TurnTimeout),
            }
            step = *inner;
        }
        self.resolve(step, &req)
    }
}
