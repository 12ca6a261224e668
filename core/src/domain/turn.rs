//! One turn's re-entry: the executor's artifact is bounded, the hard evidence gate is
//! reconstructed, terminal authority verified, and completion evaluated against the
//! stored contract. Pure: the service supplies time, keys and the event log.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::authority::{TerminalCandidate, TrustedKeys};
use super::event::{EventKind, EventLog};
use super::run::{
    Answer, Authority, Completion, Contradiction, EvidenceItem, LatestResult, Lifecycle, Question, Requirement, Run,
    TerminalProduct, required_evidence,
};
use serde_json::json;

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
}

/// A turn that produced no artifact: a typed failure of that step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnFailure {
    TurnTimeout,
    ExecutorUnavailable,
    ExecutorInvalidResponse,
}

impl TurnFailure {
    pub fn code(self) -> &'static str {
        match self {
            Self::TurnTimeout => "turn_timeout",
            Self::ExecutorUnavailable => "executor_unavailable",
            Self::ExecutorInvalidResponse => "executor_invalid_response",
        }
    }
}

pub struct TurnContext<'a> {
    pub step: u32,
    pub claim_token: &'a str,
    pub instruction: Option<&'a str>,
    pub answers: &'a [Answer],
    pub required_families: &'a [String],
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
        log.push(EventKind::RunRecovered, v, json!({ "reason": "expired_claim", "step": ctx.step }));
    }
    log.push(
        EventKind::ContinuationReceived,
        v,
        json!({ "step": ctx.step, "instruction_included": ctx.instruction.is_some(), "answers": ctx.answers.len() }),
    );
    for a in ctx.answers {
        run.pending_questions.retain(|q| q.question_id != a.question_id);
        log.push(EventKind::IssueResolved, v, json!({ "question_id": a.question_id }));
    }
    match outcome {
        Ok(artifact) => apply_artifact(run, ctx, artifact, keys, log),
        Err(failure) => apply_failure(run, ctx, failure),
    }
    if !run.is_terminal() && run.budget.steps_used >= run.budget.max_steps {
        run.lifecycle_status = Lifecycle::Failed;
        run.completion_status = Completion::BudgetExhausted;
        run.completed_at = Some(ctx.now);
        log.push(EventKind::BudgetExhausted, v, json!({ "reason": "max_steps", "steps_used": ctx.step }));
    } else {
        finish_event(run, log);
    }
}

fn apply_failure(run: &mut Run, ctx: &TurnContext<'_>, failure: TurnFailure) {
    run.lifecycle_status = Lifecycle::Waiting;
    run.completion_status = Completion::Blocked;
    let req = Requirement {
        id: format!("turn_failure:{}", failure.code()),
        kind: "turn_failure".into(),
        detail: format!("step {} ended without a solver artifact", ctx.step),
    };
    run.unresolved_requirements.retain(|r| r.kind != "turn_failure");
    run.unresolved_requirements.push(req);
    run.latest_result = Some(LatestResult {
        step: ctx.step,
        solver_status: "failed".into(),
        summary: String::new(),
        terminal_product: None,
        failure_code: Some(failure.code().into()),
    });
}

fn apply_artifact(run: &mut Run, ctx: &TurnContext<'_>, a: TurnArtifact, keys: &TrustedKeys, log: &mut EventLog) {
    let v = run.version;
    let observations = bounded_refs(&a.observation_refs);
    let receipts = bounded_refs(&a.receipt_refs);
    let evidence: Vec<EvidenceItem> = a
        .evidence
        .iter()
        .filter(|e| !e.reference.is_empty())
        .take(MAX_ITEMS_PER_TURN)
        .map(|e| EvidenceItem {
            reference: clip(&e.reference, MAX_REF_CHARS),
            family: clip(&e.family, 100),
            source: clip(&e.source, MAX_REF_CHARS),
            content_sha256: clip(&e.content_sha256, 64),
            excerpt: clip(&e.excerpt, MAX_EXCERPT_CHARS),
            step: ctx.step,
        })
        .collect();
    let evidence_refs: Vec<String> = evidence.iter().map(|e| e.reference.clone()).collect();
    let mut current_refs = observations.clone();
    current_refs.extend(evidence_refs.iter().cloned());
    current_refs.extend(receipts.iter().cloned());

    push_unique(&mut run.evidence.observation_refs, observations.clone());
    push_unique(&mut run.evidence.evidence_refs, evidence_refs.clone());
    push_unique(&mut run.evidence.receipt_refs, receipts.clone());
    for item in evidence {
        if !run.evidence_items.iter().any(|e| e.reference == item.reference) {
            run.evidence_items.push(item);
        }
    }
    if !current_refs.is_empty() {
        log.push(
            EventKind::EvidenceReentered,
            v,
            json!({ "step": ctx.step, "observation_refs": observations, "evidence_refs": evidence_refs, "receipt_refs": receipts, "satisfied_evidence_families": a.satisfied_evidence_families }),
        );
    }
    push_unique(&mut run.supported_claims, a.supported_claims.iter().take(MAX_ITEMS_PER_TURN).map(|c| clip(c, 500)));
    push_unique(&mut run.contradictions, a.contradictions.iter().take(MAX_ITEMS_PER_TURN).cloned());

    // Requirements: the executor may resolve its own; the scope-required evidence gate
    // is rebuilt here from this turn alone, whatever the executor or earlier turns said.
    let mut unresolved: Vec<Requirement> = run
        .unresolved_requirements
        .iter()
        .filter(|r| r.kind != "required_evidence" && r.kind != "turn_failure")
        .filter(|r| !a.resolved_requirements.contains(&r.id))
        .cloned()
        .collect();
    push_unique(
        &mut unresolved,
        a.unresolved_requirements
            .iter()
            .filter(|r| !r.id.starts_with("required_evidence:"))
            .take(MAX_ITEMS_PER_TURN)
            .cloned(),
    );
    let gate_open = ctx
        .required_families
        .iter()
        .filter(|f| current_refs.is_empty() || !a.satisfied_evidence_families.contains(f))
        .map(|f| required_evidence(f))
        .collect::<Vec<_>>();
    let gate_blocked = !gate_open.is_empty();
    unresolved.extend(gate_open);
    run.unresolved_requirements = unresolved;

    let new_questions: Vec<Question> = a.pending_questions.iter().take(8).cloned().collect();
    if !new_questions.is_empty() {
        log.push(
            EventKind::InputRequested,
            v,
            json!({ "question_ids": new_questions.iter().map(|q| &q.question_id).collect::<Vec<_>>() }),
        );
    }
    push_unique(&mut run.pending_questions, new_questions);

    // Terminal authority.
    let contract = run.completion_contract.clone();
    let mut product = None;
    let (authority, reason) = match &a.terminal_candidate {
        _ if gate_blocked => (Authority::Blocked, Some("required_evidence_unsatisfied".to_owned())),
        None if !contract.require_terminal_authority => (Authority::NotRequired, None),
        None => (Authority::Missing, None),
        Some(c) if c.text.chars().count() > MAX_TERMINAL_TEXT_CHARS => {
            (Authority::Rejected, Some("text_too_long".into()))
        }
        Some(c) => match keys.verify(c, &run.run_id, ctx.step, ctx.claim_token, &current_refs) {
            Ok(()) => {
                product = Some(TerminalProduct {
                    text: c.text.clone(),
                    text_sha256: c.text_sha256.clone(),
                    supporting_evidence_refs: c.supporting_refs.clone(),
                });
                (Authority::Authorized, None)
            }
            Err(rejection) => (Authority::Rejected, Some(rejection.to_string())),
        },
    };
    if let Some(c) = a.terminal_candidate.as_ref().filter(|_| authority == Authority::Authorized) {
        run.terminal_candidate_ref = Some(format!("terminal:sha256:{}", c.text_sha256));
    }
    run.terminal_authority_status = authority;
    log.push(
        EventKind::TerminalAuthorityEvaluated,
        v,
        json!({ "step": ctx.step, "status": run.terminal_authority_status, "reason": reason }),
    );

    // Completion against the stored contract.
    let supporting = match (&product, contract.require_terminal_authority) {
        (Some(p), true) => p.supporting_evidence_refs.iter().filter(|r| run.evidence.evidence_refs.contains(r)).count(),
        _ => run.evidence.evidence_refs.len(),
    };
    let fields_ok = contract.required_output_fields.iter().all(|f| match (f.as_str(), &product) {
        ("text", Some(p)) => !p.text.trim().is_empty(),
        ("supporting_evidence_refs", Some(p)) => !p.supporting_evidence_refs.is_empty(),
        _ => false,
    });
    let conflicts = !run.contradictions.is_empty() && !contract.allow_conflicts;
    let authority_ok = !contract.require_terminal_authority || authority == Authority::Authorized;
    let too_many_unresolved = run.unresolved_requirements.len() > contract.max_unresolved_requirements as usize;

    let status = if a.solver_status == SolverStatus::Failed {
        Completion::Failed
    } else if !run.pending_questions.is_empty() {
        Completion::NeedsInput
    } else if conflicts {
        Completion::ConflictDetected
    } else if gate_blocked || authority == Authority::Rejected {
        Completion::Blocked
    } else if a.solver_status == SolverStatus::Succeeded
        && supporting >= contract.min_evidence_refs as usize
        && fields_ok
        && authority_ok
        && !too_many_unresolved
    {
        Completion::Completed
    } else if too_many_unresolved && supporting >= contract.min_evidence_refs as usize {
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
    // The terminal product and output fields are stripped unless authority is verified.
    run.latest_result = Some(LatestResult {
        step: ctx.step,
        solver_status: serde_json::to_value(a.solver_status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        summary: clip(&a.summary, MAX_SUMMARY_CHARS),
        terminal_product: product,
        failure_code: None,
    });
}

fn finish_event(run: &Run, log: &mut EventLog) {
    let v = run.version;
    let failure_code = run.latest_result.as_ref().and_then(|r| r.failure_code.clone());
    let data = json!({ "completion_status": run.completion_status, "recommended_next_action": run.next_action(), "failure_code": failure_code });
    let kind = match run.completion_status {
        Completion::Completed => EventKind::RunCompleted,
        Completion::Failed => EventKind::RunFailed,
        Completion::Blocked | Completion::ConflictDetected => EventKind::RunBlocked,
        _ => EventKind::RunWaiting,
    };
    log.push(kind, v, data);
}
