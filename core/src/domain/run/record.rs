//! The stored run record and what it is made of (contract, budget, requirements,
//! evidence, results, ownership), its creation, cancellation and public projection.
//! Depends on the domain only.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::super::ids::RunId;
use super::super::sha256_hex;
use super::super::turn::SolverStatus;
use super::*;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompletionContract {
    pub min_evidence_refs: u32,
    pub require_terminal_authority: bool,
    pub required_output_fields: Vec<String>,
    pub max_unresolved_requirements: u32,
    pub allow_conflicts: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub max_steps: u32,
    pub steps_used: u32,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Requirement {
    pub id: String,
    #[schemars(with = "String")]
    pub kind: RequirementKind,
    pub detail: String,
}

/// What kind of requirement: the two the service owns (rebuilt by it on every turn,
/// never taken from a solver), or a solver's own kind (e.g. `capability`), kept as sent.
/// On the wire it is the plain string, as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum RequirementKind {
    /// `required_evidence:<family>`: the hard gate of a logical scope.
    RequiredEvidence,
    /// `turn_failure:<code>`: the step ended without a solver artifact.
    TurnFailure,
    Solver(String),
}

impl RequirementKind {
    pub fn is_service_owned(&self) -> bool {
        !matches!(self, Self::Solver(_))
    }
}

impl From<String> for RequirementKind {
    fn from(s: String) -> Self {
        match s.as_str() {
            "required_evidence" => Self::RequiredEvidence,
            "turn_failure" => Self::TurnFailure,
            _ => Self::Solver(s),
        }
    }
}

impl From<RequirementKind> for String {
    fn from(k: RequirementKind) -> Self {
        match k {
            RequirementKind::RequiredEvidence => "required_evidence".into(),
            RequirementKind::TurnFailure => "turn_failure".into(),
            RequirementKind::Solver(s) => s,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Contradiction {
    pub id: String,
    pub claim: String,
    pub evidence_refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Question {
    pub question_id: String,
    pub prompt: String,
}

/// One admitted piece of evidence (bundle detail; the run lists only refs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EvidenceItem {
    #[serde(rename = "ref")]
    pub reference: String,
    pub family: String,
    pub source: String,
    pub content_sha256: String,
    pub excerpt: String,
    pub step: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EvidenceRefs {
    pub observation_refs: Vec<String>,
    pub evidence_refs: Vec<String>,
    pub receipt_refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TerminalProduct {
    pub text: String,
    pub text_sha256: String,
    pub supporting_evidence_refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatestResult {
    pub step: u32,
    pub solver_status: SolverStatus,
    pub summary: String,
    pub terminal_product: Option<TerminalProduct>,
    pub failure_code: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub token: String,
    pub lease_until: i64,
    pub key_ref: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ownership {
    pub owner_ref: String,
    pub tenant_ref: String,
    pub account_ref: String,
}

/// The durable run. `rev` changes on every write (claims included) and is the CAS
/// guard; `version` is the public counter, bumped only by accepted mutations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub run_id: String,
    pub owner_hash: String,
    pub ownership: Ownership,
    pub objective: String,
    pub constraints: Vec<String>,
    pub database_scope: Vec<String>,
    pub completion_contract: CompletionContract,
    pub budget: Budget,
    pub lifecycle_status: Lifecycle,
    pub completion_status: Completion,
    pub terminal_authority_status: Authority,
    pub version: u64,
    pub rev: u64,
    pub last_seq: u64,
    pub unresolved_requirements: Vec<Requirement>,
    pub contradictions: Vec<Contradiction>,
    pub pending_questions: Vec<Question>,
    pub evidence: EvidenceRefs,
    pub evidence_items: Vec<EvidenceItem>,
    pub supported_claims: Vec<String>,
    pub terminal_candidate_ref: Option<String>,
    pub latest_result: Option<LatestResult>,
    pub claim: Option<Claim>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub cancelled_at: Option<DateTime<Utc>>,
}

impl Run {
    pub fn new(
        id: &RunId,
        owner_hash: String,
        ownership: Ownership,
        spec: StartSpec,
        required_families: &[&str],
        now: DateTime<Utc>,
    ) -> Self {
        Run {
            run_id: id.to_string(),
            owner_hash,
            ownership,
            objective: spec.objective,
            constraints: spec.constraints,
            database_scope: spec.database_scope,
            completion_contract: spec.contract,
            budget: Budget {
                max_steps: spec.max_steps,
                steps_used: 0,
                expires_at: now + Duration::seconds(spec.expires_in_seconds as i64),
            },
            lifecycle_status: Lifecycle::Waiting,
            completion_status: Completion::NeedsMoreEvidence,
            terminal_authority_status: Authority::NotEvaluated,
            version: 1,
            rev: 1,
            last_seq: 0,
            unresolved_requirements: required_families.iter().map(|f| required_evidence(f)).collect(),
            contradictions: vec![],
            pending_questions: vec![],
            evidence: EvidenceRefs::default(),
            evidence_items: vec![],
            supported_claims: vec![],
            terminal_candidate_ref: None,
            latest_result: None,
            claim: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
            cancelled_at: None,
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.completion_status.is_terminal()
    }

    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        now >= self.budget.expires_at
    }

    /// A claim whose lease has not run out.
    pub fn live_claim(&self, now_epoch: i64) -> Option<&Claim> {
        self.claim.as_ref().filter(|c| c.lease_until > now_epoch)
    }

    pub fn next_action(&self) -> NextAction {
        match self.completion_status {
            c if c.is_terminal() => NextAction::Stop,
            Completion::NeedsInput => NextAction::AnswerQuestions,
            _ => NextAction::Continue,
        }
    }

    pub fn objective_hash(&self) -> String {
        format!("sha256:{}", sha256_hex(&self.objective))
    }

    /// Cancel: irreversible, bumps the version, clears any claim (so a running
    /// turn's finalization fails its compare-and-set).
    pub fn cancel(&mut self, now: DateTime<Utc>) {
        self.lifecycle_status = Lifecycle::Cancelled;
        self.completion_status = Completion::Cancelled;
        self.pending_questions.clear();
        self.claim = None;
        self.version += 1;
        self.updated_at = now;
        self.cancelled_at = Some(now);
    }

    /// Ends the run for step or time exhaustion.
    pub fn exhaust(&mut self, now: DateTime<Utc>) {
        self.lifecycle_status = Lifecycle::Failed;
        self.completion_status = Completion::BudgetExhausted;
        self.claim = None;
        self.version += 1;
        self.updated_at = now;
        self.completed_at = Some(now);
    }

    /// The public `helix.agent_run.v1` projection (see `wire::RunView`).
    pub fn to_public(&self) -> serde_json::Value {
        super::super::wire::to_value(&super::super::wire::RunView::of(self))
    }

    /// The projection as observed at `now_epoch` (see `wire::RunView::observed`),
    /// serialized once.
    pub fn observed_json(&self, now_epoch: i64) -> super::super::wire::RunJson {
        super::super::wire::RunJson::of(&super::super::wire::RunView::observed(self, now_epoch))
    }

    /// The `helix.agent_run.evidence_bundle.v1` projection (see `wire::EvidenceBundleView`).
    pub fn evidence_bundle(&self) -> serde_json::Value {
        super::super::wire::to_value(&super::super::wire::EvidenceBundleView::of(self))
    }
}

pub fn required_evidence(family: &str) -> Requirement {
    Requirement {
        id: format!("required_evidence:{family}"),
        kind: RequirementKind::RequiredEvidence,
        detail: format!("a current turn must supply {family} with current artifact references"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirement_kinds_keep_their_wire_strings() {
        for kind in ["required_evidence", "turn_failure", "capability"] {
            let r: Requirement =
                serde_json::from_value(serde_json::json!({"id": "x", "kind": kind, "detail": "d"})).unwrap();
            assert_eq!(serde_json::to_value(&r).unwrap()["kind"], kind);
            assert_eq!(r.kind.is_service_owned(), kind != "capability");
        }
        assert_eq!(Completion::BudgetExhausted.as_str(), "budget_exhausted");
        for c in [Completion::Pending, Completion::NeedsMoreEvidence, Completion::Cancelled] {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }
}
