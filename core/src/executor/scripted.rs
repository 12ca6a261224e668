//! Test executor: replays scripted steps (artifacts, failures, delays) in order, and
//! records the requests it saw. A step may sign its terminal candidate with the
//! request's run id, step and claim token, as a real solver would.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{TurnExecutor, TurnRequest};
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
    /// Cites the request's answered environment probe (its observation ref) as
    /// `shared_live_room_environment_probe` evidence, names the family and signs a terminal
    /// candidate on it: what a solver does with a probe answer it cannot know in advance.
    CiteRoomProbe,
    /// Waits (cancellable) before answering with the inner step.
    Delay(Duration, Box<Step>),
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
            Step::CiteRoomProbe => {
                let probe = req.room_probe.as_ref().ok_or(TurnFailure::ExecutorInvalidResponse)?;
                let r = probe.answer.observation_ref.clone();
                let family = crate::domain::source::PROBE_FAMILY;
                let artifact: TurnArtifact = serde_json::from_value(serde_json::json!({
                    "solver_status": "succeeded",
                    "summary": "read the probe answer",
                    "observation_refs": [r],
                    "evidence": [{ "ref": r, "family": family, "source": "room-probe",
                        "content_sha256": probe.answer.content_sha256, "excerpt": probe.answer.summary }],
                    "satisfied_evidence_families": [family],
                }))
                .map_err(|_| TurnFailure::ExecutorInvalidResponse)?;
                let text = probe.answer.summary.clone();
                self.resolve(Step::Signed { artifact, text, refs: vec![r] }, req)
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
