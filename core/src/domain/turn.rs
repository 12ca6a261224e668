//! One turn's re-entry: the executor's artifact is bounded, the hard evidence gate is
//! reconstructed, terminal authority verified, and completion evaluated against the
//! stored contract. Pure: the service supplies time, keys and the event log.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::authority::{TerminalCandidate, TrustedKeys};
use super::event::{
    AuthorityEvaluated, BudgetExhausted, ContinuationReceived, EventData, EventLog, EvidenceReentered,
    ExhaustionReason, InputRequested, IssueResolved, RecoveryReason, RunRecovered, RunSettled,
};
use super::run::{
    Answer, Authority, Completion, Contradiction, EvidenceItem, LatestResult, Lifecycle, Question, Requirement,
    RequirementKind, Run, TerminalProduct, required_evidence,
};
use super::sha256_hex;

mod conversation;
mod evidence;
mod read_mode;
mod redaction;

pub use conversation::{ConversationContext, QuotedMessage, conversation_context};
pub use read_mode::read_mode_violation;

use evidence::{ReentryAudit, project_evidence, rebuild_requirements};

pub const MAX_SUMMARY_CHARS: usize = 2000;
pub const MAX_EXCERPT_CHARS: usize = 600;
pub const MAX_REF_CHARS: usize = 200;
pub const MAX_ITEMS_PER_TURN: usize = 50;
pub const MAX_TERMINAL_TEXT_CHARS: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SolverStatus {
    Succeeded,
    Partial,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactEvidence {
    #[serde(rename = "ref")]
    pub reference: String,
    pub family: String,
    pub source: String,
    pub content_sha256: String,
    #[serde(default)]
    pub excerpt: String,
}

/// What one solver turn returns (the `http` executor's response body, versioned).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnArtifact {
    pub solver_status: SolverStatus,
    pub summary: String,
    #[serde(default)]
    pub observation_refs: Vec<String>,
    #[serde(default)]
    pub evidence: Vec<ArtifactEvidence>,
    #[serde(default)]
    pub receipt_refs: Vec<String>,
    #[serde(default)]
    pub satisfied_evidence_families: Vec<String>,
    #[serde(default)]
    pub unresolved_requirements: Vec<Requirement>,
    #[serde(default)]
    pub resolved_requirements: Vec<String>,
    #[serde(default)]
    pub contradictions: Vec<Contradiction>,
    #[serde(default)]
    pub supported_claims: Vec<String>,
    #[serde(default)]
    pub pending_questions: Vec<Question>,
    #[serde(default)]
    pub terminal_candidate: Option<TerminalCandidate>,
    /// The read capabilities the solver called this turn: each must be one the request
    /// admitted (read mode), or the turn is refused.
    #[serde(default)]
    pub capabilities_used: Vec<String>,
    /// A room mutation the turn asks for: applied only with a verified, unreplayed
    /// approval receipt bound to this turn (docs/turn-contract.md).
    #[serde(default)]
    pub room_mutation: Option<super::approval::RoomMutationRequest>,
}

/// A turn that produced no artifact: a typed failure of that step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnFailure {
    TurnTimeout,
    /// The turn was stopped by a cancellation of its run, not by its deadline.
    TurnCancelled,
    ExecutorUnavailable,
    ExecutorInvalidResponse,
    /// Bound-room rechecks (before the turn, and again before projection): each its own code.
    RoomBindingMissing,
    RoomMembershipChanged,
    RoomConsentChanged,
    RoomNotActive,
    RoomPolicyChanged,
    RoomSourceNotAdmitted,
    RoomEvidenceStale,
    RoomEvidenceIdentityMismatch,
    RoomEvidenceUnavailable,
    /// The environment probe: no paired source answered within the turn's bounded wait.
    RoomProbeUnanswered,
    /// More than one admitted source of the bound room could answer the probe.
    RoomProbeSourceAmbiguous,
    /// Read mode: the artifact cites a capability the request did not admit.
    CapabilityNotAdmitted,
    /// Read mode: the artifact cites an evidence family outside the admitted set.
    EvidenceFamilyNotAdmitted,
    /// The turn asks for a confirmation-governed room mutation and no approval host is
    /// configured: the internal Ask limitation, never inferred or auto-signed.
    RuntimeApprovalHostUnconfigured,
    /// An approval host is configured but the turn's mutation carries no receipt.
    RuntimeApprovalReceiptMissing,
    /// The receipt does not verify for this turn and this mutation (or its key is not trusted).
    RuntimeApprovalReceiptInvalid,
    /// The receipt was already consumed (the one-time replay ledger).
    RuntimeApprovalReceiptReplayed,
}

impl TurnFailure {
    pub fn code(self) -> &'static str {
        match self {
            Self::TurnTimeout => "turn_timeout",
            Self::TurnCancelled => "turn_cancelled",
            Self::ExecutorUnavailable => "executor_unavailable",
            Self::ExecutorInvalidResponse => "executor_invalid_response",
            Self::RoomBindingMissing => "room_binding_missing",
            Self::RoomMembershipChanged => "room_membership_changed",
            Self::RoomConsentChanged => "room_consent_changed",
            Self::RoomNotActive => "room_not_active",
            Self::RoomPolicyChanged => "room_policy_changed",
            Self::RoomSourceNotAdmitted => "room_source_not_admitted",
            Self::RoomEvidenceStale => "room_evidence_stale",
            Self::RoomEvidenceIdentityMismatch => "room_evidence_identity_mismatch",
            Self::RoomEvidenceUnavailable => "room_evidence_unavailable",
            Self::RoomProbeUnanswered => "room_probe_unanswered",
            Self::RoomProbeSourceAmbiguous => "room_probe_source_ambiguous",
            Self::CapabilityNotAdmitted => "capability_not_admitted",
            Self::EvidenceFamilyNotAdmitted => "evidence_family_not_admitted",
            Self::RuntimeApprovalHostUnconfigured => "runtime_approval_host_unconfigured",
            Self::RuntimeApprovalReceiptMissing => "runtime_approval_receipt_missing",
            Self::RuntimeApprovalReceiptInvalid => "runtime_approval_receipt_invalid",
            Self::RuntimeApprovalReceiptReplayed => "runtime_approval_receipt_replayed",
        }
    }
}

pub struct TurnContext<'a> {
    pub step: u32,
    pub claim_token: &'a str,
    pub instruction: Option<&'a str>,
    pub answers: &'a [Answer],
    pub required_families: &'a [String],
    /// Families whose current refs the service itself issued this turn (bound-room
    /// observations, the probe answer): such a family counts only when the turn cites
    /// at least one of its refs.
    pub family_refs: &'a [(String, Vec<String>)],
    pub recovered: bool,
    pub now: DateTime<Utc>,
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

fn bounded_refs(refs: &[String]) -> Vec<String> {
    refs.iter().filter(|r| !r.is_empty()).take(MAX_ITEMS_PER_TURN).map(|r| clip(r, MAX_REF_CHARS)).collect()
}

fn push_unique<T: PartialEq + Clone>(into: &mut Vec<T>, items: impl IntoIterator<Item = T>) {
    for i in items {
        if !into.contains(&i) {
            into.push(i);
        }
    }
}

/// Applies one turn to the claimed run: bumps version and step, clears the claim,
/// and records every event of the turn. The run must be claimed and not terminal.
pub fn apply_turn(
    run: &mut Run,
    ctx: &TurnContext<'_>,
    outcome: Result<TurnArtifact, TurnFailure>,
    keys: &TrustedKeys,
    log: &mut EventLog,
) {
    run.version += 1;
    run.budget.steps_used = ctx.step;
    run.claim = None;
    run.updated_at = ctx.now;
    let v = run.version;
    if ctx.recovered {
        log.push(v, EventData::RunRecovered(RunRecovered { reason: RecoveryReason::ExpiredClaim, step: ctx.step }));
    }
    log.push(
        v,
        EventData::ContinuationReceived(ContinuationReceived {
            answers: ctx.answers.len(),
            instruction_included: ctx.instruction.is_some(),
            step: ctx.step,
        }),
    );
    for a in ctx.answers {
        run.pending_questions.retain(|q| q.question_id != a.question_id);
        log.push(v, EventData::IssueResolved(IssueResolved { question_id: a.question_id.clone() }));
    }
    match outcome {
        Ok(artifact) => apply_artifact(run, ctx, redaction::screened(artifact), keys, log),
        Err(failure) => apply_failure(run, ctx, failure),
    }
    if !run.is_terminal() && run.budget.steps_used >= run.budget.max_steps {
        run.lifecycle_status = Lifecycle::Failed;
        run.completion_status = Completion::BudgetExhausted;
        run.completed_at = Some(ctx.now);
        log.push(
            v,
            EventData::BudgetExhausted(BudgetExhausted { reason: ExhaustionReason::MaxSteps, steps_used: ctx.step }),
        );
    } else {
        finish_event(run, log);
    }
}

fn apply_failure(run: &mut Run, ctx: &TurnContext<'_>, failure: TurnFailure) {
    run.lifecycle_status = Lifecycle::Waiting;
    run.completion_status = Completion::Blocked;
    let req = Requirement {
        id: format!("turn_failure:{}", failure.code()),
        kind: RequirementKind::TurnFailure,
        detail: format!("step {} ended without a solver artifact", ctx.step),
    };
    run.unresolved_requirements.retain(|r| r.kind != RequirementKind::TurnFailure);
    run.unresolved_requirements.push(req);
    // The latest turn offered no terminal candidate.
    run.terminal_candidate_ref = None;
    run.latest_result = Some(LatestResult {
        step: ctx.step,
        solver_status: SolverStatus::Failed,
        summary: String::new(),
        terminal_product: None,
        failure_code: Some(failure.code().into()),
    });
}

/// Re-enters one solver artifact, in named steps: audit the turn's refs, rebuild the
/// requirements (the hard gate), verify terminal authority, project evidence, then
/// evaluate completion. Events keep the order re-entry, input, authority.
fn apply_artifact(run: &mut Run, ctx: &TurnContext<'_>, a: TurnArtifact, keys: &TrustedKeys, log: &mut EventLog) {
    let v = run.version;
    let audit = ReentryAudit::of(&a, ctx.step);
    let gate_blocked = rebuild_requirements(run, ctx, &a, &audit);
    let verdict = evaluate_authority(run, ctx, &a, &audit, keys, gate_blocked);
    project_evidence(run, ctx, &a, &audit, verdict.product.as_ref(), log);
    request_input(run, &a, log);
    run.terminal_candidate_ref =
        a.terminal_candidate.as_ref().map(|c| format!("terminal:sha256:{}", sha256_hex(&c.text)));
    run.terminal_authority_status = verdict.authority;
    log.push(
        v,
        EventData::TerminalAuthorityEvaluated(AuthorityEvaluated {
            reason: verdict.reason.clone(),
            status: verdict.authority,
            step: ctx.step,
        }),
    );
    evaluate_completion(run, ctx, &a, &verdict, gate_blocked);
}

/// The verdict on this turn's terminal candidate.
struct AuthorityVerdict {
    authority: Authority,
    reason: Option<String>,
    /// The verified terminal product (only when `authorized`).
    product: Option<TerminalProduct>,
}

fn evaluate_authority(
    run: &Run,
    ctx: &TurnContext<'_>,
    a: &TurnArtifact,
    audit: &ReentryAudit,
    keys: &TrustedKeys,
    gate_blocked: bool,
) -> AuthorityVerdict {
    let verdict = |authority, reason: Option<&str>| AuthorityVerdict {
        authority,
        reason: reason.map(str::to_owned),
        product: None,
    };
    match &a.terminal_candidate {
        _ if gate_blocked => verdict(Authority::Blocked, Some("required_evidence_unsatisfied")),
        None if !run.completion_contract.require_terminal_authority => verdict(Authority::NotRequired, None),
        None => verdict(Authority::Missing, None),
        Some(c) if c.text.chars().count() > MAX_TERMINAL_TEXT_CHARS => {
            verdict(Authority::Rejected, Some("text_too_long"))
        }
        Some(c) if redaction::carries_credential(&c.text) => {
            verdict(Authority::Rejected, Some("text_carries_credential"))
        }
        Some(c) => match keys.verify(c, &run.run_id, ctx.step, ctx.claim_token, &audit.current_refs()) {
            Ok(()) => AuthorityVerdict {
                authority: Authority::Authorized,
                reason: None,
                product: Some(TerminalProduct {
                    text: c.text.clone(),
                    text_sha256: c.text_sha256.clone(),
                    supporting_evidence_refs: c.supporting_refs.clone(),
                }),
            },
            Err(rejection) => {
                AuthorityVerdict { authority: Authority::Rejected, reason: Some(rejection.to_string()), product: None }
            }
        },
    }
}

fn request_input(run: &mut Run, a: &TurnArtifact, log: &mut EventLog) {
    let new_questions: Vec<Question> = a.pending_questions.iter().take(8).cloned().collect();
    if !new_questions.is_empty() {
        log.push(
            run.version,
            EventData::InputRequested(InputRequested {
                question_ids: new_questions.iter().map(|q| q.question_id.clone()).collect(),
            }),
        );
    }
    push_unique(&mut run.pending_questions, new_questions);
}

/// Completion against the stored contract; the terminal product and output fields are
/// projected only when authority is verified.
fn evaluate_completion(
    run: &mut Run,
    ctx: &TurnContext<'_>,
    a: &TurnArtifact,
    verdict: &AuthorityVerdict,
    gate_blocked: bool,
) {
    let contract = &run.completion_contract;
    let product = verdict.product.as_ref();
    let supporting = match (product, contract.require_terminal_authority) {
        (Some(p), true) => p.supporting_evidence_refs.iter().filter(|r| run.evidence.evidence_refs.contains(r)).count(),
        _ => run.evidence.evidence_refs.len(),
    };
    let fields_ok = contract.required_output_fields.iter().all(|f| match (f.as_str(), product) {
        ("text", Some(p)) => !p.text.trim().is_empty(),
        ("supporting_evidence_refs", Some(p)) => !p.supporting_evidence_refs.is_empty(),
        _ => false,
    });
    let conflicts = !run.contradictions.is_empty() && !contract.allow_conflicts;
    let authority_ok = !contract.require_terminal_authority || verdict.authority == Authority::Authorized;
    let too_many_unresolved = run.unresolved_requirements.len() > contract.max_unresolved_requirements as usize;
    let enough_evidence = supporting >= contract.min_evidence_refs as usize;

    let status = if a.solver_status == SolverStatus::Failed {
        Completion::Failed
    } else if !run.pending_questions.is_empty() {
        Completion::NeedsInput
    } else if conflicts {
        Completion::ConflictDetected
    } else if gate_blocked || verdict.authority == Authority::Rejected {
        Completion::Blocked
    } else if a.solver_status == SolverStatus::Succeeded
        && enough_evidence
        && fields_ok
        && authority_ok
        && !too_many_unresolved
    {
        Completion::Completed
    } else if too_many_unresolved && enough_evidence {
        Completion::Blocked
    } else {
        Completion::NeedsMoreEvidence
    };
    run.completion_status = status;
    run.lifecycle_status = match status {
        Completion::Completed => Lifecycle::Completed,
        Completion::Failed => Lifecycle::Failed,
        _ => Lifecycle::Waiting,
    };
    if status.is_terminal() {
        run.completed_at = Some(ctx.now);
    }
    run.latest_result = Some(LatestResult {
        step: ctx.step,
        solver_status: a.solver_status,
        summary: clip(&a.summary, MAX_SUMMARY_CHARS),
        terminal_product: verdict.product.clone(),
        failure_code: None,
    });
}

fn finish_event(run: &Run, log: &mut EventLog) {
    let v = run.version;
    let failure_code = run.latest_result.as_ref().and_then(|r| r.failure_code.clone());
    let settled = RunSettled {
        completion_status: run.completion_status,
        failure_code,
        recommended_next_action: run.next_action(),
    };
    let kind = match run.completion_status {
        Completion::Completed => EventData::RunCompleted,
        Completion::Failed => EventData::RunFailed,
        Completion::Blocked | Completion::ConflictDetected => EventData::RunBlocked,
        _ => EventData::RunWaiting,
    };
    log.push(v, kind(settled));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::authority::TerminalSigner;
    use crate::domain::event::{Event, EventKind};
    use crate::domain::ids::RunId;
    use crate::domain::run::{CompletionContract, NextAction, Ownership, StartRequest};

    const FAMILY: &str = "library_evidence";
    const CLAIM: &str = "claim-1";

    fn signer() -> TerminalSigner {
        TerminalSigner::from_seed("test-solver", "k1", [7; 32])
    }

    fn trusted() -> TrustedKeys {
        let s = signer();
        let mut keys = TrustedKeys::default();
        keys.insert(&s.issuer, &s.key_id, s.verifying_key());
        keys
    }

    fn run(max_steps: u32, contract: fn(&mut CompletionContract)) -> Run {
        let req = serde_json::json!({"objective": "x", "budget": {"max_steps": max_steps}});
        let spec = serde_json::from_value::<StartRequest>(req).unwrap().validate().unwrap();
        let owner = Ownership { owner_ref: "o".into(), tenant_ref: "t".into(), account_ref: "a".into() };
        let mut run = Run::new(&RunId::parse("run_abcdefgh").unwrap(), "h".into(), owner, spec, &[FAMILY], Utc::now());
        contract(&mut run.completion_contract);
        run
    }

    fn evidence(reference: &str) -> ArtifactEvidence {
        ArtifactEvidence {
            reference: reference.into(),
            family: FAMILY.into(),
            source: format!("library://{reference}"),
            content_sha256: "00".into(),
            excerpt: "an excerpt".into(),
        }
    }

    /// A turn that meets the default contract: one piece of the required family and a
    /// terminal candidate signed for this run, step and claim, citing it.
    fn good_artifact() -> TurnArtifact {
        TurnArtifact {
            capabilities_used: vec![],
            room_mutation: None,
            solver_status: SolverStatus::Succeeded,
            summary: "done".into(),
            observation_refs: vec![],
            evidence: vec![evidence("ev:1")],
            receipt_refs: vec![],
            satisfied_evidence_families: vec![FAMILY.into()],
            unresolved_requirements: vec![],
            resolved_requirements: vec![],
            contradictions: vec![],
            supported_claims: vec!["a claim".into()],
            pending_questions: vec![],
            terminal_candidate: Some(signer().sign("run_abcdefgh", 1, CLAIM, "the answer [ev:1]", vec!["ev:1".into()])),
        }
    }

    enum Turn {
        /// The good artifact, changed by the function.
        Artifact(fn(&mut TurnArtifact)),
        Failure(TurnFailure),
    }

    struct Case {
        name: &'static str,
        turn: Turn,
        max_steps: u32,
        contract: fn(&mut CompletionContract),
        completion: Completion,
        lifecycle: Lifecycle,
        authority: Authority,
        events: &'static [EventKind],
    }

    fn same(_: &mut TurnArtifact) {}
    fn default_contract(_: &mut CompletionContract) {}

    use EventKind::{
        BudgetExhausted as Exhausted, ContinuationReceived as Received, EvidenceReentered as Reentered,
        InputRequested as Asked, RunBlocked as Blocked, RunCompleted as Completed, RunFailed as Failed,
        RunWaiting as Waiting, TerminalAuthorityEvaluated as Evaluated,
    };

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "a succeeded turn with the required evidence and a verified candidate completes",
                turn: Turn::Artifact(same),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Completed,
                lifecycle: Lifecycle::Completed,
                authority: Authority::Authorized,
                events: &[Received, Reentered, Evaluated, Completed],
            },
            Case {
                name: "without a candidate, grounded evidence is not projected and more is needed",
                turn: Turn::Artifact(|a| a.terminal_candidate = None),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::NeedsMoreEvidence,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Missing,
                events: &[Received, Reentered, Evaluated, Waiting],
            },
            Case {
                name: "a turn without the required family is blocked by the evidence gate",
                turn: Turn::Artifact(|a| {
                    a.evidence.clear();
                    a.satisfied_evidence_families.clear();
                }),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Blocked,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Blocked,
                events: &[Received, Evaluated, Blocked],
            },
            Case {
                name: "a family declared satisfied without any current ref does not open the gate",
                turn: Turn::Artifact(|a| a.evidence.clear()),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Blocked,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Blocked,
                events: &[Received, Evaluated, Blocked],
            },
            Case {
                name: "a candidate signed for another step is rejected and blocks",
                turn: Turn::Artifact(|a| {
                    a.terminal_candidate =
                        Some(signer().sign("run_abcdefgh", 2, CLAIM, "the answer", vec!["ev:1".into()]));
                }),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Blocked,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Rejected,
                events: &[Received, Reentered, Evaluated, Blocked],
            },
            Case {
                name: "a candidate citing a ref outside this turn is rejected",
                turn: Turn::Artifact(|a| {
                    a.terminal_candidate =
                        Some(signer().sign("run_abcdefgh", 1, CLAIM, "the answer", vec!["ev:old".into()]));
                }),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Blocked,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Rejected,
                events: &[Received, Reentered, Evaluated, Blocked],
            },
            Case {
                name: "a partial turn re-enters nothing, so the gate stays closed",
                turn: Turn::Artifact(|a| a.solver_status = SolverStatus::Partial),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Blocked,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Blocked,
                events: &[Received, Evaluated, Blocked],
            },
            Case {
                name: "a failed solver status fails the run",
                turn: Turn::Artifact(|a| a.solver_status = SolverStatus::Failed),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Failed,
                lifecycle: Lifecycle::Failed,
                authority: Authority::Blocked,
                events: &[Received, Evaluated, Failed],
            },
            Case {
                name: "a pending question needs input before anything else",
                turn: Turn::Artifact(|a| {
                    a.pending_questions = vec![Question { question_id: "q1".into(), prompt: "which?".into() }];
                }),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::NeedsInput,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Authorized,
                events: &[Received, Reentered, Asked, Evaluated, Waiting],
            },
            Case {
                name: "a contradiction is a conflict unless the contract allows conflicts",
                turn: Turn::Artifact(|a| {
                    a.contradictions =
                        vec![Contradiction { id: "c1".into(), claim: "x".into(), evidence_refs: vec!["ev:1".into()] }];
                }),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::ConflictDetected,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Authorized,
                events: &[Received, Reentered, Evaluated, Blocked],
            },
            Case {
                name: "an allowed contradiction does not stop completion",
                turn: Turn::Artifact(|a| {
                    a.contradictions =
                        vec![Contradiction { id: "c1".into(), claim: "x".into(), evidence_refs: vec!["ev:1".into()] }];
                }),
                max_steps: 12,
                contract: |c| c.allow_conflicts = true,
                completion: Completion::Completed,
                lifecycle: Lifecycle::Completed,
                authority: Authority::Authorized,
                events: &[Received, Reentered, Evaluated, Completed],
            },
            Case {
                name: "fewer supporting refs than the contract's minimum need more evidence",
                turn: Turn::Artifact(same),
                max_steps: 12,
                contract: |c| c.min_evidence_refs = 2,
                completion: Completion::NeedsMoreEvidence,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Authorized,
                events: &[Received, Reentered, Evaluated, Waiting],
            },
            Case {
                name: "without required authority, evidence alone completes",
                turn: Turn::Artifact(|a| a.terminal_candidate = None),
                max_steps: 12,
                contract: |c| c.require_terminal_authority = false,
                completion: Completion::Completed,
                lifecycle: Lifecycle::Completed,
                authority: Authority::NotRequired,
                events: &[Received, Reentered, Evaluated, Completed],
            },
            Case {
                name: "an unresolved solver requirement over the contract's allowance blocks",
                turn: Turn::Artifact(|a| {
                    a.unresolved_requirements = vec![Requirement {
                        id: "solver:detail".into(),
                        kind: RequirementKind::Solver("detail".into()),
                        detail: "d".into(),
                    }];
                }),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Blocked,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::Authorized,
                events: &[Received, Reentered, Evaluated, Blocked],
            },
            Case {
                name: "a required text output is met by the verified product",
                turn: Turn::Artifact(same),
                max_steps: 12,
                contract: |c| c.required_output_fields = vec!["text".into(), "supporting_evidence_refs".into()],
                completion: Completion::Completed,
                lifecycle: Lifecycle::Completed,
                authority: Authority::Authorized,
                events: &[Received, Reentered, Evaluated, Completed],
            },
            Case {
                name: "a required output field without authority is never met",
                turn: Turn::Artifact(|a| a.terminal_candidate = None),
                max_steps: 12,
                contract: |c| {
                    c.require_terminal_authority = false;
                    c.required_output_fields = vec!["text".into()];
                },
                completion: Completion::NeedsMoreEvidence,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::NotRequired,
                events: &[Received, Reentered, Evaluated, Waiting],
            },
            Case {
                name: "a turn that produced no artifact blocks the run with its failure",
                turn: Turn::Failure(TurnFailure::ExecutorUnavailable),
                max_steps: 12,
                contract: default_contract,
                completion: Completion::Blocked,
                lifecycle: Lifecycle::Waiting,
                authority: Authority::NotEvaluated,
                events: &[Received, Blocked],
            },
            Case {
                name: "the last step without completion exhausts the budget",
                turn: Turn::Artifact(|a| a.terminal_candidate = None),
                max_steps: 1,
                contract: default_contract,
                completion: Completion::BudgetExhausted,
                lifecycle: Lifecycle::Failed,
                authority: Authority::Missing,
                events: &[Received, Reentered, Evaluated, Exhausted],
            },
            Case {
                name: "a failed turn on the last step exhausts the budget",
                turn: Turn::Failure(TurnFailure::TurnTimeout),
                max_steps: 1,
                contract: default_contract,
                completion: Completion::BudgetExhausted,
                lifecycle: Lifecycle::Failed,
                authority: Authority::NotEvaluated,
                events: &[Received, Exhausted],
            },
            Case {
                name: "completing on the last step is completion, not exhaustion",
                turn: Turn::Artifact(same),
                max_steps: 1,
                contract: default_contract,
                completion: Completion::Completed,
                lifecycle: Lifecycle::Completed,
                authority: Authority::Authorized,
                events: &[Received, Reentered, Evaluated, Completed],
            },
            Case {
                name: "a failed solver status on the last step is a failure, not exhaustion",
                turn: Turn::Artifact(|a| a.solver_status = SolverStatus::Failed),
                max_steps: 1,
                contract: default_contract,
                completion: Completion::Failed,
                lifecycle: Lifecycle::Failed,
                authority: Authority::Blocked,
                events: &[Received, Evaluated, Failed],
            },
        ]
    }

    fn ctx(required_families: &[String], now: DateTime<Utc>) -> TurnContext<'_> {
        TurnContext {
            step: 1,
            claim_token: CLAIM,
            instruction: None,
            answers: &[],
            required_families,
            family_refs: &[],
            recovered: false,
            now,
        }
    }

    fn apply(case: &Case) -> (Run, Vec<Event>) {
        let mut run = run(case.max_steps, case.contract);
        let outcome = match &case.turn {
            Turn::Artifact(change) => {
                let mut a = good_artifact();
                change(&mut a);
                Ok(a)
            }
            Turn::Failure(f) => Err(*f),
        };
        let families = vec![FAMILY.to_string()];
        let ctx = ctx(&families, Utc::now());
        let mut log = EventLog::after(&run.run_id, run.last_seq, ctx.now);
        apply_turn(&mut run, &ctx, outcome, &trusted(), &mut log);
        (run, log.events)
    }

    #[test]
    fn completion_follows_solver_status_evidence_authority_and_budget() {
        for case in cases() {
            let (run, events) = apply(&case);
            let name = case.name;
            assert_eq!(run.completion_status, case.completion, "{name}");
            assert_eq!(run.lifecycle_status, case.lifecycle, "{name}");
            assert_eq!(run.terminal_authority_status, case.authority, "{name}");
            assert_eq!(events.iter().map(Event::kind).collect::<Vec<_>>(), case.events, "{name}");
            assert_eq!((run.version, run.budget.steps_used, run.claim.is_none()), (2, 1, true), "{name}");
            assert!(events.iter().all(|e| e.version == run.version), "{name}: events carry the new version");
            assert_eq!(run.completed_at.is_some(), run.is_terminal(), "{name}");
        }
    }

    #[test]
    fn the_last_event_states_where_the_turn_left_the_run() {
        for case in cases() {
            let (run, events) = apply(&case);
            let name = case.name;
            let failure_code = run.latest_result.as_ref().and_then(|r| r.failure_code.clone());
            match &events.last().unwrap().data {
                EventData::RunWaiting(s)
                | EventData::RunCompleted(s)
                | EventData::RunBlocked(s)
                | EventData::RunFailed(s) => {
                    assert_eq!(s.completion_status, run.completion_status, "{name}");
                    assert_eq!(s.recommended_next_action, run.next_action(), "{name}");
                    assert_eq!(s.failure_code, failure_code, "{name}");
                }
                EventData::BudgetExhausted(b) => {
                    assert_eq!((b.reason, b.steps_used), (ExhaustionReason::MaxSteps, 1), "{name}");
                    assert_eq!(run.next_action(), NextAction::Stop, "{name}");
                }
                other => panic!("{name}: the last event is {other:?}"),
            }
            if let Some(EventData::TerminalAuthorityEvaluated(v)) =
                events.iter().map(|e| &e.data).find(|d| d.kind() == EventKind::TerminalAuthorityEvaluated)
            {
                assert_eq!(v.status, run.terminal_authority_status, "{name}");
                assert_eq!(v.reason.is_some(), matches!(v.status, Authority::Blocked | Authority::Rejected), "{name}");
            }
        }
    }

    #[test]
    fn a_turn_failure_is_recorded_as_a_service_owned_requirement_and_result() {
        let case = cases().into_iter().find(|c| matches!(c.turn, Turn::Failure(_)) && c.max_steps == 12).unwrap();
        let (run, _) = apply(&case);
        let result = run.latest_result.as_ref().unwrap();
        assert_eq!(
            (result.solver_status, result.failure_code.as_deref()),
            (SolverStatus::Failed, Some("executor_unavailable"))
        );
        assert!(run.unresolved_requirements.iter().any(|r| r.id == "turn_failure:executor_unavailable"));
        assert!(run.terminal_candidate_ref.is_none());
    }

    #[test]
    fn evidence_is_projected_only_when_the_verified_authority_cites_it() {
        let projected = |case: &str| {
            let case = cases().into_iter().find(|c| c.name.starts_with(case)).unwrap();
            let (run, events) = apply(&case);
            let reentered = events.iter().find_map(|e| match &e.data {
                EventData::EvidenceReentered(r) => Some(r.evidence_refs.clone()),
                _ => None,
            });
            (run.evidence.evidence_refs, reentered)
        };
        let ev = vec!["ev:1".to_string()];
        assert_eq!(projected("a succeeded turn"), (ev.clone(), Some(ev.clone())));
        assert_eq!(projected("without a candidate"), (vec![], Some(vec![])));
        assert_eq!(projected("without required authority"), (ev.clone(), Some(ev)));
        assert_eq!(projected("a partial turn"), (vec![], None));
    }

    #[test]
    fn a_recovered_claim_and_answers_come_first_in_the_events() {
        let mut run = run(12, default_contract);
        run.pending_questions = vec![Question { question_id: "q1".into(), prompt: "which?".into() }];
        let answers = vec![Answer { question_id: "q1".into(), value: serde_json::json!("this one") }];
        let families = vec![FAMILY.to_string()];
        let ctx = TurnContext {
            instruction: Some("go on"),
            answers: &answers,
            recovered: true,
            ..ctx(&families, Utc::now())
        };
        let mut log = EventLog::after(&run.run_id, 4, ctx.now);
        apply_turn(&mut run, &ctx, Ok(good_artifact()), &trusted(), &mut log);
        let data: Vec<&EventData> = log.events.iter().map(|e| &e.data).collect();
        assert_eq!(data[0], &EventData::RunRecovered(RunRecovered { reason: RecoveryReason::ExpiredClaim, step: 1 }));
        assert_eq!(
            data[1],
            &EventData::ContinuationReceived(ContinuationReceived { answers: 1, instruction_included: true, step: 1 })
        );
        assert_eq!(data[2], &EventData::IssueResolved(IssueResolved { question_id: "q1".into() }));
        assert_eq!(
            log.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (5..=5 + data.len() as u64 - 1).collect::<Vec<_>>()
        );
        assert!(run.pending_questions.is_empty(), "the answered question is no longer pending");
        assert_eq!(run.completion_status, Completion::Completed);
    }
}
